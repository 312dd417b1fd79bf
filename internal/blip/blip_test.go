package blip

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestSwitch: nothing fails before the switch is armed; the first arrival
// after starts the blip, which fails what arrives within its length.
func TestSwitch(t *testing.T) {
	var s Switch
	t0 := time.Unix(1_000_000, 0)
	assert.False(t, s.Failing(t0, time.Second), "not armed")
	assert.Zero(t, s.Arrivals.Load())
	s.Arm()
	assert.True(t, s.Failing(t0.Add(time.Minute), time.Second), "the first arrival starts it")
	assert.Equal(t, t0.Add(time.Minute), s.Start())
	assert.True(t, s.Failing(t0.Add(time.Minute+999*time.Millisecond), time.Second))
	assert.False(t, s.Failing(t0.Add(time.Minute+time.Second), time.Second), "over")
	assert.Equal(t, int64(3), s.Arrivals.Load())
}
