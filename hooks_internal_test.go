package retryhttp

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// hookCounts are the numbers of hooks of each kind an observer holds; nil
// for no observer at all.
type hookCounts struct{ attempt, decision, park, circuit int }

func countHooks(o *observer) *hookCounts {
	if o == nil {
		return nil
	}
	return &hookCounts{len(o.onAttempt), len(o.onDecision), len(o.onPark), len(o.onCircuit)}
}

// TestWithHooksInstallsOnlyWhatIsSet checks that WithHooks gives a
// Transport an observer only when some hook is set, so that a Transport
// given only nil hooks checks one nil pointer on the request path, as one
// without WithHooks; and that each non-nil hook lands in its own list,
// after those of earlier options.
func TestWithHooksInstallsOnlyWhatIsSet(t *testing.T) {
	all := Hooks{
		OnAttempt:            func(AttemptInfo) {},
		OnRetryDecision:      func(Decision) {},
		OnPark:               func(ParkEvent) {},
		OnCircuitStateChange: func(string, CircuitState, CircuitState) {},
	}
	tests := []struct {
		name string
		give []Option
		want *hookCounts
	}{
		{name: "none", give: nil, want: nil},
		{name: "zero Hooks", give: []Option{WithHooks(Hooks{})}, want: nil},
		{name: "park only", give: []Option{WithHooks(Hooks{OnPark: all.OnPark})}, want: &hookCounts{park: 1}},
		{
			name: "all, twice", give: []Option{WithHooks(all), WithHooks(Hooks{}), WithHooks(all)},
			want: &hookCounts{attempt: 2, decision: 2, park: 2, circuit: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, countHooks(New(tt.give...).obs))
		})
	}
}
