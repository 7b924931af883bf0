// CourierTesting
