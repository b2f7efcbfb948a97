package operator

// RunEvent is runEvent, for the tests of package operator_test that read
// the events topic themselves.
var RunEvent = runEvent
