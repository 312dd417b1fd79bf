package otelretryhttp_test

import (
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind. The idle
// keep-alive connections of the base transport shared by Transports made
// without WithTransport are the process's pool, not a leak: they are closed
// after the tests, before the check.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(closeSharedPoolAfter{m})
}

// closeSharedPoolAfter runs the tests, then closes the shared pool's idle
// connections.
type closeSharedPoolAfter struct{ m *testing.M }

func (c closeSharedPoolAfter) Run() int {
	code := c.m.Run()
	retryhttp.New().CloseIdleConnections()
	return code
}
