package tokenbucket

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestBucket(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := New(2, 3, t0) // 2 per second, burst 3, full at t0
	tests := []struct {
		at   time.Duration // after t0
		want bool
	}{
		{0, true}, {0, true}, {0, true}, // the burst
		{0, false},
		{400 * time.Millisecond, false},                         // 0.8 of a token
		{500 * time.Millisecond, true},                          // 1.0
		{400 * time.Millisecond, false},                         // earlier than the last refill: nothing
		{time.Hour, true}, {time.Hour, true}, {time.Hour, true}, // refilled to the burst, not beyond
		{time.Hour, false},
	}
	for i, tt := range tests {
		assert.Equal(t, tt.want, b.Take(t0.Add(tt.at)), "take %d at %v", i, tt.at)
	}
}
