package retryhttp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIsDNSErr(t *testing.T) {
	tests := []struct {
		name string
		give error
		want bool
	}{
		{"nil", nil, false},
		{"bare", errDNS, true},
		{"fmt %w", fmt.Errorf("lookup: %w", errDNS), true},
		{"errors.Join", errors.Join(errors.New("first"), errDNS), true},
		{"url.Error", &url.Error{Op: "Get", URL: "http://x/", Err: errDNS}, true},
		{"url.Error of OpError", &url.Error{Op: "Get", URL: "http://x/", Err: &net.OpError{Op: "dial", Err: errDNS}}, true},
		{"retries exhausted", fmt.Errorf("%w: %w", retryhttp.ErrRetriesExhausted, errDNS), true},
		{"DNS timeout", &net.DNSError{Err: "timeout", IsTimeout: true}, true},
		{"dial error", errDial, false},
		{"fmt %v", fmt.Errorf("lookup: %v", errDNS), false},
		{"other", errors.New("no such host"), false},
		{"timeout", fakeTimeoutErr{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, retryhttp.IsDNSErr(tt.give))
		})
	}
}

func TestIsTimeoutErr(t *testing.T) {
	tests := []struct {
		name string
		give error
		want bool
	}{
		{"nil", nil, false},
		{"net.Error timeout", fakeTimeoutErr{}, true},
		{"net.Error not timeout", fakeNonTimeoutErr{}, false},
		{"os.ErrDeadlineExceeded", os.ErrDeadlineExceeded, true},
		{"context.DeadlineExceeded", context.DeadlineExceeded, true},
		{"ErrAttemptTimeout", retryhttp.ErrAttemptTimeout, true},
		{"fmt %w ErrAttemptTimeout", fmt.Errorf("x: %w", retryhttp.ErrAttemptTimeout), true},
		{"errors.Join", errors.Join(errors.New("first"), os.ErrDeadlineExceeded), true},
		{"url.Error", &url.Error{Op: "Get", URL: "http://x/", Err: fakeTimeoutErr{}}, true},
		{"url.Error of OpError", &url.Error{Op: "Get", URL: "http://x/", Err: &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}}, true},
		{"DNS timeout", &net.DNSError{Err: "timeout", IsTimeout: true}, true},
		{"DNS not found", errDNS, false},
		{"context.Canceled", context.Canceled, false},
		{"fmt %v", fmt.Errorf("x: %v", fakeTimeoutErr{}), false},
		{"errors.New", errors.New("timeout"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, retryhttp.IsTimeoutErr(tt.give))
		})
	}
}

// Regression: errors.As stops at the first error with a Timeout method, so a
// wrapper answering false hid a timeout deeper in the tree.
func TestIsTimeoutErrLooksThroughNonTimeoutWrappers(t *testing.T) {
	notTimeout := &net.OpError{Op: "read", Err: errors.New("boom")}
	require.False(t, retryhttp.IsTimeoutErr(notTimeout))
	require.True(t, retryhttp.IsTimeoutErr(errors.Join(notTimeout, os.ErrDeadlineExceeded)))
	require.True(t, retryhttp.IsTimeoutErr(&net.OpError{Op: "read", Err: fmt.Errorf("x: %w", os.ErrDeadlineExceeded)}))
}
