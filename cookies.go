package retryhttp

import "net/http"

// WithCookieJar stores the cookies of every response the transport
// discards, that of an attempt it retries, in jar, and rebuilds the Cookie
// header of every retry from jar, as http.Client does for each request it
// sends. Give it the jar of the http.Client whose Transport this is: the
// client stores the cookies of the response it gets, and adds the jar's
// cookies to the first attempt; without this option, a cookie set by a
// response that was retried (a sticky-session or challenge cookie on a 503
// or 429) is neither sent on the retry nor stored.
//
// On a retry, a cookie of the jar replaces the request's cookie of the same
// name, and one it lacks is added; the request's other cookies (those the
// caller set) are kept. A cookie the discarded response deleted is deleted
// from the jar but stays on the retry if the request had it. The jar must be
// safe for concurrent use, as net/http/cookiejar's is. A nil jar, the
// default, means no cookies are handled between attempts.
func WithCookieJar(jar http.CookieJar) Option {
	return func(t *Transport) {
		t.cookieJar = jar
		if jar != nil {
			o := t.observer()
			o.onDecision = append(o.onDecision, func(d Decision) { storeCookies(jar, d) })
		}
	}
}

// storeCookies stores in jar the cookies of the response of an attempt that
// d retries.
func storeCookies(jar http.CookieJar, d Decision) {
	a := d.Attempt
	if !d.Retry || a.Res == nil || a.Req == nil || a.Req.URL == nil {
		return
	}
	if cookies := a.Res.Cookies(); len(cookies) > 0 {
		jar.SetCookies(a.Req.URL, cookies)
	}
}

// addJarCookies rebuilds the Cookie header of req, a retry's own copy, from
// the transport's cookie jar, if any.
func (t *Transport) addJarCookies(req *http.Request) {
	if t.cookieJar == nil {
		return
	}
	fromJar := t.cookieJar.Cookies(req.URL)
	if len(fromJar) == 0 {
		return
	}
	cookies := req.Cookies()
	for _, jc := range fromJar {
		cookies = setCookie(cookies, jc.Name, jc.Value)
	}
	req.Header.Del("Cookie")
	for _, c := range cookies {
		req.AddCookie(c)
	}
}

// setCookie gives the cookie name of cookies the value value, adding it if
// cookies has none of that name.
func setCookie(cookies []*http.Cookie, name, value string) []*http.Cookie {
	for _, c := range cookies {
		if c.Name == name {
			c.Value = value
			return cookies
		}
	}
	return append(cookies, &http.Cookie{Name: name, Value: value})
}
