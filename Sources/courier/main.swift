import CourierCLI

await CourierMain.main()
