package retryhttp_test

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"sort"
	"sync"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stickyServer answers 503 with a session cookie until a request carries
// that cookie, then 200 with a cookie of its own; it records each
// request's cookies.
type stickyServer struct {
	*testkit.CountingServer
	mu      sync.Mutex
	cookies []string
}

func newStickyServer(t *testing.T) *stickyServer {
	s := &stickyServer{}
	s.CountingServer = testkit.NewCountingServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.cookies = append(s.cookies, r.Header.Get("Cookie"))
		s.mu.Unlock()
		if c, err := r.Cookie("session"); err != nil || c.Value != "s1" {
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1"})
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "done", Value: "yes"})
	})
	return s
}

func (s *stickyServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.cookies...)
}

func jarNames(jar http.CookieJar, u string) []string {
	parsed, _ := url.Parse(u)
	var names []string
	for _, c := range jar.Cookies(parsed) {
		names = append(names, c.Name+"="+c.Value)
	}
	sort.Strings(names)
	return names
}

func TestCookieJarCarriesRetriedAttemptsCookies(t *testing.T) {
	srv := newStickyServer(t)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithCookieJar(jar))
	client := &http.Client{Transport: tr, Jar: jar}
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: "pref", Value: "dark"}) // the caller's own

	res, err := client.Do(req)
	require.NoError(t, err)
	testkit.ReadAll(t, res)

	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, []string{"pref=dark", "pref=dark; session=s1"}, srv.seen(), "the retry carries the 503's cookie")
	assert.Equal(t, []string{"done=yes", "session=s1"}, jarNames(jar, srv.URL), "both responses' cookies are stored")
}

func TestCookieJarReplacesStaleCookie(t *testing.T) {
	srv := newStickyServer(t)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	u, _ := url.Parse(srv.URL)
	jar.SetCookies(u, []*http.Cookie{{Name: "session", Value: "expired"}})
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithCookieJar(jar))
	client := &http.Client{Transport: tr, Jar: jar}

	res, err := client.Get(srv.URL)
	require.NoError(t, err)
	testkit.ReadAll(t, res)

	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, []string{"session=expired", "session=s1"}, srv.seen())
}

func TestWithoutCookieJarRetriedCookiesAreLost(t *testing.T) {
	// The limitation WithCookieJar lifts: the retries happen below the
	// client, which sees the last response only.
	srv := newStickyServer(t)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	tr := testkit.NewTransport(t, testkit.NoDelay)
	client := &http.Client{Transport: tr, Jar: jar}

	res, err := client.Get(srv.URL)
	require.NoError(t, err)
	testkit.ReadAll(t, res)

	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.Equal(t, []string{"", "", "", ""}, srv.seen())
}
