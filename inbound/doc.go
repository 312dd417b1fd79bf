// Package inbound is the inbound side of a service that calls others
// through retryhttp: middleware around its own handlers. A client-only user
// of retryhttp never reads it.
//
// In a chain of services that all retry, what a server does with the
// requests it receives decides how far a storm spreads: LoadShedder refuses
// the work the server cannot do in time, early and cheaply, with an answer
// its callers know how to treat; Pushback tells the callers above a service
// that already retried a failure not to retry it again; Deadline gives a
// handler's context the deadline its caller sent (retryhttp's
// WithDeadlineHeader), so that the service stops working, and retrying, for
// a caller that has gone. They work with the client side in package
// retryhttp (its Transport honours the Retry-Pushback signal and
// Retry-After, and sends the deadline header), and with any other client.
//
// The order of the wrappers, from the outside in: Deadline, so that the
// shedder sees the caller's deadline; then LoadShedder's Handler, so that a
// request refused costs nothing more; then Pushback, around the handler
// whose outbound calls go through retryhttp Transports:
// inbound.Deadline(shedder.Handler(inbound.Pushback(mux))).
// docs/shedding.md, docs/deadlines.md and docs/storms.md give the design
// and the measurements.
package inbound
