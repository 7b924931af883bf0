// CourierWorker
