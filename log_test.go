package retryhttp_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedactURLsIn(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{"no url here", "no url here"},
		{`Get "http://u:p@h:1/a/b?token=s#f": EOF`, `Get "http://h:1/a/b": EOF`},
		{`Post "https://u:***@h/p?q=a b c#frag": dial tcp: refused`, `Post "https://h/p": dial tcp: refused`},
		{"proxyconnect tcp via http://pu:pp@proxy:3128?x=1 failed", "proxyconnect tcp via http://proxy:3128 failed"},
		{"two: ws://h/x?a=1 and ftp://u@g/y#z.", "two: ws://h/x and ftp://g/y"},
		{"password with marks: http://u:p?a#s@h/x?q", "password with marks: http://h/x"},
		{"no scheme ://h/?q=1", "no scheme ://h/?q=1"},
		{"query at host http://h?q=s3cr3t end", "query at host http://h end"},
		{"", ""},
		{"trailing http://", "trailing http://"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, retryhttp.RedactURLsIn(tt.give), "%q", tt.give)
	}
}

// clientBase is a base transport that is itself an http.Client, so that its
// errors are net/http's *url.Error, whose text quotes the URL with the
// password masked as "***" and the query and fragment in full.
type clientBase struct{ c *http.Client }

func (b clientBase) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.RequestURI = ""
	return b.c.Do(r)
}

// TestLogsRedactErrorsOfNestedClients: the errors of nested clients, of
// redirects and of proxies quote URLs in forms of their own; none of their
// userinfo, query or fragment reaches a log record.
func TestLogsRedactErrorsOfNestedClients(t *testing.T) {
	redirects := newCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/next?token=r3d1r3ct#frag", http.StatusFound)
	})
	proxy, err := url.Parse("http://proxyuser:pr0xypass@" + strings.TrimPrefix(deadURL(t), "http://") + "/?ptoken=pr0xy")
	require.NoError(t, err)
	tests := []struct {
		name string
		base http.RoundTripper
		url  string
	}{
		{"nested client, refused", clientBase{&http.Client{}}, strings.Replace(deadURL(t), "http://", "http://alice:pa55w0rd@", 1) + "/p?token=s3cr3t#frag"},
		{"nested client, redirects", clientBase{&http.Client{}}, strings.Replace(redirects.URL, "http://", "http://alice:pa55w0rd@", 1) + "/p?token=s3cr3t#frag"},
		{"nested client through a proxy", clientBase{&http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}},
			"http://alice:pa55w0rd@example.test/p?token=s3cr3t#frag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			tr := newTransport(t, noDelay, retryhttp.WithMaxRetries(1), retryhttp.WithTransport(tt.base),
				retryhttp.WithShouldRetryFn(func(a retryhttp.Attempt) bool { return a.Err != nil }),
				retryhttp.WithLogger(slog.New(slog.NewTextHandler(&out, nil))))
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, tt.url, nil)
			require.NoError(t, err)
			_, err = tr.RoundTrip(req)
			require.Error(t, err)
			var ue *url.Error
			require.True(t, errors.As(err, &ue), "the base's error is a *url.Error: %v", err)
			logged := out.String()
			require.Equal(t, 2, strings.Count(logged, "\n"), "a retry and the give-up:\n%s", logged)
			for _, secret := range []string{"alice", "pa55w0rd", "token", "s3cr3t", "r3d1r3ct", "frag", "***", "xxxxx", "proxyuser", "pr0xy"} {
				assert.NotContains(t, logged, secret)
			}
		})
	}
}
