enum EmbeddedCheck { static let size = PackageResources._001_init_sql.count }
