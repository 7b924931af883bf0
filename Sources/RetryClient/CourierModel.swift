// The policy types RetryClient speaks in (`TransportError`, `DeliveryPolicy`, `Backoff`,
// `RandomSource`, `OAuth2ClientCredentials`) live in CourierModel, which has no dependencies;
// re-exported so a user of RetryClient needs one import.
@_exported import CourierModel
