package retryhttp

import "unsafe"

// The write watch's callback, its trace's WroteHeaders, must know its
// watch, and a Go func that knows a value is a closure: an allocation of
// its own, per watched request. The callback's closure is laid out inside
// the watch instead. A closure is, as the gc compiler makes it, a word for
// its code followed by the variables it captures; a func value points to
// it. Whether the compiler at hand lays out the closure of a func that
// marks a watch so is checked once, at start-up, on a closure it made
// (findWroteCode); otherwise, each watch allocates its closure as any Go
// code does.

// wroteClosure is laid out as the closure of a func literal that captures
// one *writeWatch by value: the code, then the captured pointer.
type wroteClosure struct {
	code uintptr
	w    *writeWatch
}

// wroteCode is the code of a func that marks the watch it captured as
// written, or 0 if closures are not laid out as wroteClosure.
var wroteCode = findWroteCode()

// findWroteCode returns the code of a closure that marks its captured watch
// written, if that closure is laid out as wroteClosure says and a closure
// made in a wroteClosure, called, marks its own watch; otherwise 0.
func findWroteCode() uintptr {
	probe := new(writeWatch)
	f := func() { probe.wrote.Store(true) }
	made := (*wroteClosure)(*(*unsafe.Pointer)(unsafe.Pointer(&f)))
	if made.w != probe {
		return 0
	}
	check := &writeWatch{}
	check.closure = wroteClosure{made.code, check}
	c := &check.closure
	(*(*func())(unsafe.Pointer(&c)))()
	if !check.wrote.Load() || probe.wrote.Load() {
		return 0
	}
	return made.code
}

// setWroteHeaders sets w's trace's WroteHeaders to a func that marks w
// written, whose closure is w's own field when wroteCode is known.
func (w *writeWatch) setWroteHeaders() {
	if wroteCode == 0 {
		w.trace.WroteHeaders = func() { w.wrote.Store(true) }
		return
	}
	w.closure = wroteClosure{wroteCode, w}
	c := &w.closure
	w.trace.WroteHeaders = *(*func())(unsafe.Pointer(&c))
}
