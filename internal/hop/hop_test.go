package hop_test

import (
	"context"
	"testing"

	"github.com/seed2409de8f/retryhttp/internal/hop"
	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestOutcome(t *testing.T) {
	assert.Nil(t, hop.OutcomeFrom(context.Background()), "none")

	var o hop.Outcome
	ctx := hop.WithOutcome(context.Background(), &o)
	child, cancel := context.WithCancel(ctx)
	defer cancel()
	assert.Same(t, &o, hop.OutcomeFrom(child), "derived contexts report to it")
	assert.False(t, o.GaveUp())
	hop.OutcomeFrom(child).MarkGaveUp()
	assert.True(t, o.GaveUp())

	assert.Nil(t, hop.OutcomeFrom(hop.WithOutcome(ctx, nil)), "excluded")
}

func TestFailedStatus(t *testing.T) {
	for code, want := range map[int]bool{200: false, 404: false, 428: false, 429: true, 499: false, 500: true, 503: true, 599: true} {
		assert.Equal(t, want, hop.FailedStatus(code), "%d", code)
	}
}
