// RetryClient
