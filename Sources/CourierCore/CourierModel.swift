// CourierCore stores and reads CourierModel's types (jobs, transitions, attempt records,
// schedules); re-exported so a user of CourierCore needs one import.
@_exported import CourierModel
