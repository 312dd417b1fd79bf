package integrations

import (
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// ownBudget gives a transport a retry budget of its own, so that tests do
// not share the process's default one.
func ownBudget() retryhttp.Option {
	return retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{}))
}

// noDelay retries at once.
var noDelay = retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 })
