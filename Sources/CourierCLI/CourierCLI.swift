// CourierCLI
