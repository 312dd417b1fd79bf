package errclass

import (
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
)

// xnetStreamError has the shape and message of golang.org/x/net/http2's
// StreamError, which has no As method (bench/integrations tests the real
// one, over h2c).
type xnetStreamError struct {
	StreamID uint32
	Code     uint32
}

func (e xnetStreamError) Error() string {
	return fmt.Sprintf("stream error: stream ID %d; INTERNAL_ERROR; received from peer", e.StreamID)
}

func TestHTTP2StreamResetIsConnLost(t *testing.T) {
	tests := []struct {
		name string
		give error
		want bool
	}{
		{"x/net's StreamError", xnetStreamError{StreamID: 3, Code: 2}, true},
		{"x/net's, in a url.Error", &url.Error{Op: "Put", URL: "http://x", Err: xnetStreamError{StreamID: 1}}, true},
		{"x/net's, joined", errors.Join(errors.New("other"), xnetStreamError{StreamID: 1}), true},
		{"net/http's shape, by errors.As", http2StreamError{StreamID: 1}, true},
		{"the prefix in a wrapper's message only", fmt.Errorf("stream error: stream ID 1: %w", errors.New("x")), false},
		{"the prefix later in the message", errors.New("read: stream error: stream ID 1"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ConnLost(tt.give))
		})
	}
}

func TestIsTunnelRefused(t *testing.T) {
	tests := []struct {
		name string
		give error
		want bool
	}{
		{"502", errors.New("Bad Gateway"), true},
		{"503", errors.New("Service Unavailable"), true},
		{"504", errors.New("Gateway Timeout"), true},
		{"503 in a url.Error", &url.Error{Op: "Get", URL: "https://x", Err: errors.New("Service Unavailable")}, true},
		{"403", errors.New("Forbidden"), false},
		{"407", errors.New("Proxy Authentication Required"), false},
		{"a phrase of the proxy's own", errors.New("Proxy Error"), false},
		{"the phrase inside a longer message", errors.New("upstream: Service Unavailable"), false},
		{"the phrase as a wrapper's message only", fmt.Errorf("Bad Gateway%w", errors.New("")), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, TunnelRefused(tt.give))
			assert.Equal(t, tt.want, Dial(tt.give), "a refused tunnel is a dial error")
		})
	}
}
