import CourierCLI
