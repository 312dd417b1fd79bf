package inbound

import (
	"fmt"
	"math/bits"
	"testing"

	"github.com/seed2409de8f/retryhttp/internal/doccheck"
)

// TestDocNumbers holds every number in the doc comments of the package's
// exported API to the value it states (internal/doccheck): the rows tied
// to a constant are written from it; the others state no constant.
func TestDocNumbers(t *testing.T) {
	dur, n := doccheck.Dur, fmt.Sprint
	maxLimit := fmt.Sprintf("above 2^%d are treated as 2^%d", bits.TrailingZeros(maxShedLimit), bits.TrailingZeros(maxShedLimit))
	if maxShedLimit&(maxShedLimit-1) != 0 {
		t.Fatalf("the doc comments write maxShedLimit, %d, as a power of two", maxShedLimit)
	}
	tied := [][2]string{
		{"LoadShedderOptions.Limit", "the default: " + n(defaultShedLimit) + " for a fixed limit, " + n(defaultShedInitialLimit) + " for an adaptive one"},
		{"LoadShedderOptions.Limit", maxLimit},
		{"LoadShedderOptions.MinLimit", n(defaultShedMinLimit) + " and " + doccheck.Commas(defaultShedMaxLimit) + " by default"},
		{"LoadShedderOptions.MinLimit", maxLimit},
		{"LoadShedderOptions.MaxLimit", n(defaultShedMinLimit) + " and " + doccheck.Commas(defaultShedMaxLimit) + " by default"},
		{"LoadShedderOptions.MaxLimit", maxLimit},
		{"LoadShedderOptions.MaxQueue", maxLimit},
		{"LoadShedderOptions.ProbeInterval", "(at least " + n(shedMinWindow) + " of them): " + dur(defaultShedProbeInterval) + " by default"},
		{"LoadShedderOptions.MaxQueueWait", dur(defaultShedQueueWait) + " by default"},
		{"LoadShedderOptions.RetryAfter", dur(defaultShedRetryAfter) + " by default"},
		{"LoadShedderOptions.RetryAfterJitter", fmt.Sprintf("with the defaults, %s and %s, a shed request gets %d or %d seconds",
			dur(defaultShedRetryAfter), n(defaultShedJitter), int(defaultShedRetryAfter.Seconds()), int(defaultShedRetryAfter.Seconds()*(1+defaultShedJitter)))},
		{"LoadShedderOptions.RetryAfterJitter", "mean the default, " + n(defaultShedJitter) + ";"},
		{"LoadShedderOptions.RetryAfterJitter", "above " + n(maxShedJitter) + " are treated as " + n(maxShedJitter)},
		{"Deadline", "of at most " + n(maxDeadlineDigits) + " digits"},
		{"TimeLeft", "[0, " + doccheck.Commas(int64(pow10(maxDeadlineDigits)-1)) + " ms]"},
	}
	facts := [][2]string{
		{"Pushback", "2. the handler's own status"}, // the second of a numbered list
	}
	doccheck.CheckNumbers(t, ".", append(tied, facts...))
}

// pow10 returns 10^n.
func pow10(n int) int {
	p := 1
	for range n {
		p *= 10
	}
	return p
}
