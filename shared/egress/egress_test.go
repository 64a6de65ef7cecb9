package egress_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/egress"
)

var (
	cloud   = egress.Options{Timeout: 2 * time.Second}
	harness = egress.Options{AllowLoopback: true, AllowHTTP: true, Timeout: 2 * time.Second}
)

// TestNoProxyFromEnvironment: with HTTPS_PROXY/HTTP_PROXY set, the client
// still connects to the receiver itself (a proxy would hide the real
// destination from the address check). It is the first test of the file:
// net/http reads the proxy variables once per process, on first use.
func TestNoProxyFromEnvironment(t *testing.T) {
	proxy, proxyHits := server(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(502) })
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("NO_PROXY", "")
	dns := fakeDNS(t, "receiver.a2awire.test.", [4]byte{127, 0, 0, 1})
	srv, hits := server(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	o := harness
	o.Resolver = dns
	port := itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	// A name, not a loopback literal: the standard proxy rules skip
	// loopback literals themselves, which would prove nothing.
	resp, err := get(egress.NewClient(o), "http://receiver.a2awire.test:"+port)
	if err != nil || resp.StatusCode != 204 || hits.Load() != 1 || proxyHits.Load() != 0 {
		t.Fatalf("status %v err %v receiver %d proxy %d", resp, err, hits.Load(), proxyHits.Load())
	}
}

// TestCheckAddr is the SSRF table of issue 12, and then some,
// as CheckAddr judges each address (no network involved).
func TestCheckAddr(t *testing.T) {
	refused := []string{
		"127.0.0.1", "127.1.2.3", "::1", "10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1",
		"100.64.0.1", "100.127.255.254", "169.254.169.254", "169.254.1.1", "0.0.0.0", "0.1.2.3", "::",
		"224.0.0.1", "239.255.255.250", "255.255.255.255", "240.0.0.1", "fd00::1", "fc00::1",
		"fd00:ec2::254", "fe80::1", "fe80::1%eth0", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1",
		"::ffff:169.254.169.254", "::ffff:100.64.0.1", "::127.0.0.1", "64:ff9b::a9fe:a9fe", "192.0.0.8",
		"2001:db8::1", "198.18.0.1",
	}
	for _, s := range refused {
		err := egress.CheckAddr(netip.MustParseAddr(s), cloud)
		if !errors.Is(err, egress.ErrBlocked) {
			t.Errorf("cloud mode allows %s", s)
		}
	}
	public := []string{"8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.1", "172.32.0.1", "169.253.0.1",
		"2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "11.0.0.1"}
	for _, s := range public {
		if err := egress.CheckAddr(netip.MustParseAddr(s), cloud); err != nil {
			t.Errorf("cloud mode refuses public %s: %v", s, err)
		}
	}
	// Harness mode lets loopback through, in every form, and nothing else.
	for _, s := range []string{"127.0.0.1", "::1", "::ffff:127.0.0.1"} {
		if err := egress.CheckAddr(netip.MustParseAddr(s), harness); err != nil {
			t.Errorf("harness mode refuses %s: %v", s, err)
		}
	}
	for _, s := range []string{"10.0.0.1", "169.254.169.254", "fd00::1", "::ffff:192.168.0.1", "100.64.0.1"} {
		if err := egress.CheckAddr(netip.MustParseAddr(s), harness); err == nil {
			t.Errorf("harness mode allows %s", s)
		}
	}
	var be *egress.BlockedError
	if err := egress.CheckAddr(netip.MustParseAddr("169.254.169.254"), cloud); !errors.As(err, &be) || be.Reason != "cloud metadata" {
		t.Errorf("metadata address: %v", err)
	}
}

// server is a loopback receiver that counts its requests.
func server(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s, &n
}

func get(c *http.Client, url string) (*http.Response, error) {
	resp, err := c.Get(url)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	return resp, err
}

// TestClientRefusesInCloudMode dials through the real client. Only
// 127.0.0.1 is ever connected to: every other address is refused in
// Control, before the socket connects; loopback addresses are refused the
// same way in cloud mode, while the same URL succeeds in harness mode (so the
// refusal is the check's doing). Plain http is allowed in both clients here
// so that the address check is what is tested.
func TestClientRefusesInCloudMode(t *testing.T) {
	srv, hits := server(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	portS := ":" + itoa(port)

	dns := fakeDNS(t, "rebind.a2awire.test.", [4]byte{127, 0, 0, 1})
	cloudO := cloud
	cloudO.AllowHTTP = true
	cloudO.Resolver = dns
	harnessO := harness
	harnessO.Resolver = dns
	cloudC, harnessC := egress.NewClient(cloudO), egress.NewClient(harnessO)

	urls := []string{
		"http://127.0.0.1" + portS,
		"http://[::1]" + portS,
		"http://10.0.0.1" + portS,
		"http://100.64.0.1" + portS,
		"http://169.254.169.254" + portS + "/latest/meta-data/",
		"http://[::ffff:127.0.0.1]" + portS,
		"http://[fd00::1]" + portS,
		"http://[fd00:ec2::254]" + portS,
		"http://localhost" + portS,
		"http://rebind.a2awire.test" + portS, // resolves to 127.0.0.1 through fakeDNS
	}
	for _, u := range urls {
		_, err := get(cloudC, u)
		if !errors.Is(err, egress.ErrBlocked) {
			t.Errorf("cloud client: %s: want refused, got %v", u, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the receiver was reached %d times in cloud mode", n)
	}
	// The loopback ones reach the receiver in harness mode.
	for _, u := range []string{urls[0], urls[5], urls[9]} {
		if resp, err := get(harnessC, u); err != nil || resp.StatusCode != 204 {
			t.Errorf("harness client: %s: %v", u, err)
		}
	}
	if n := hits.Load(); n != 3 {
		t.Errorf("harness mode reached the receiver %d times, want 3", n)
	}
	// And the harness client still refuses the rest.
	for _, u := range []string{urls[2], urls[4], urls[6]} {
		if _, err := get(harnessC, u); !errors.Is(err, egress.ErrBlocked) {
			t.Errorf("harness client: %s: want refused, got %v", u, err)
		}
	}
}

// TestRedirectNotFollowed: a receiver answering 302 to another loopback URL
// gets its 302 back to the caller; the target is never requested.
func TestRedirectNotFollowed(t *testing.T) {
	target, targetHits := server(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })
	redir, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/internal", http.StatusFound)
	})
	c := egress.NewClient(harness)
	resp, err := get(c, redir.URL)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusFound || !strings.HasSuffix(resp.Header.Get("Location"), "/internal") {
		t.Errorf("want the 302 itself, got %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// POST with 307 (what a webhook delivery would meet) likewise.
	redir307, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	})
	resp, err = c.Post(redir307.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect {
		t.Errorf("POST: want 307, got %d", resp.StatusCode)
	}
	if n := targetHits.Load(); n != 0 {
		t.Fatalf("the redirect target was requested %d times", n)
	}
}

// TestSchemeRefused: a cloud client refuses plain http even when handed an
// http URL directly.
func TestSchemeRefused(t *testing.T) {
	srv, hits := server(t, func(w http.ResponseWriter, _ *http.Request) {})
	o := cloud
	o.AllowLoopback = true // so that only the scheme is in question
	if _, err := get(egress.NewClient(o), srv.URL); !errors.Is(err, egress.ErrBlocked) {
		t.Fatalf("cloud client sent plain http: %v", err)
	}
	if hits.Load() != 0 {
		t.Fatal("receiver reached")
	}
}

func TestValidateURL(t *testing.T) {
	long := "https://example.com/" + strings.Repeat("a", egress.MaxURLLength)
	bad := map[string]string{
		"http://example.com/hook":          "http in cloud mode",
		"ftp://example.com/":               "ftp",
		"https://user:pw@example.com/":     "userinfo",
		"https://example.com/#frag":        "fragment",
		"/relative":                        "relative",
		"https://":                         "no host",
		"https://127.0.0.1/":               "loopback literal",
		"https://[::1]/":                   "ipv6 loopback",
		"https://10.0.0.1/":                "private",
		"https://169.254.169.254/":         "metadata",
		"https://[::ffff:127.0.0.1]/":      "mapped loopback",
		"https://[fd00::1]/":               "ula",
		"https://localhost/":               "localhost",
		"https://api.localhost./x":         "localhost subdomain",
		"https://example.com:0/":           "port 0",
		"https://example.com:99999/":       "port range",
		"mailto:x@example.com":             "opaque",
		long:                               "too long",
		"https://exa mple.com/":            "space",
		"https://example.com/\x00":         "control",
		"https://100.64.0.1/":              "cgnat",
		"https://0.0.0.0/":                 "unspecified",
		"https://[fe80::1%25eth0]/":        "link-local zone",
		"HTTPS://127.0.0.1:8443/x?y=1":     "upper-case scheme, loopback",
		"https://example.com/hook#":        "empty fragment",
		"javascript:alert(1)":              "javascript",
		"https:///path":                    "empty host",
		"https://user@example.com/":        "user only",
		"https://[::]/":                    "v6 unspecified",
		"https://224.0.0.1/":               "multicast",
		"https://255.255.255.255/":         "broadcast",
		"https://[64:ff9b::7f00:1]/":       "nat64 of loopback",
		"https://[::127.0.0.1]/":           "v4-compatible loopback",
		"https://[fd00:ec2::254]/latest":   "aws v6 metadata",
		"https://172.20.0.1/":              "private 172",
		"https://192.168.0.1/":             "private 192",
		"https://[ff02::1]/":               "v6 multicast",
		"https://[fe80::1]/":               "v6 link-local",
		"https://169.254.0.1/":             "link-local",
		"https://127.0.0.1.nip.io.evil/":   "", // a name: allowed here, the dialer judges it
		"https://example.com/ok?q=1&r=2#x": "fragment with query",
	}
	for u, why := range bad {
		if why == "" {
			continue
		}
		_, err := egress.ValidateURL(u, egress.Options{})
		if err == nil {
			t.Errorf("ValidateURL accepted %q (%s)", u, why)
			continue
		}
		if apierror.KindOf(err) != apierror.Invalid {
			t.Errorf("%q: kind %v", u, apierror.KindOf(err))
		}
	}
	for _, u := range []string{"https://example.com/hook", "https://example.com:8443/a/b?c=d", "https://8.8.8.8/x",
		"https://[2606:4700::1111]/", "https://127.0.0.1.nip.io.evil/"} {
		if _, err := egress.ValidateURL(u, egress.Options{}); err != nil {
			t.Errorf("ValidateURL refused %q: %v", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:9000/hook", "http://localhost:9000/", "http://[::1]:1/", "https://127.0.0.1/"} {
		if _, err := egress.ValidateURL(u, harness); err != nil {
			t.Errorf("harness mode refused %q: %v", u, err)
		}
	}
	for _, u := range []string{"http://10.0.0.1/", "http://169.254.169.254/", "ftp://127.0.0.1/"} {
		if _, err := egress.ValidateURL(u, harness); err == nil {
			t.Errorf("harness mode accepted %q", u)
		}
	}
}

func itoa(n int) string {
	return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(n)).String()[len("0.0.0.0:"):]
}

// fakeDNS serves, on 127.0.0.1 over UDP, one name's A record (and an empty
// answer for anything else), and returns a resolver that asks it alone: a
// name resolving to loopback without /etc/hosts or the system's DNS.
func fakeDNS(t *testing.T, name string, a [4]byte) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := dnsAnswer(buf[:n], name, a); resp != nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}
	}()
	addr := pc.LocalAddr().String()
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", addr)
		},
	}
}

// dnsAnswer builds the response to one query (RFC 1035 §4.1): the question
// echoed, one A record when it asks for name's A, none otherwise.
func dnsAnswer(q []byte, name string, a [4]byte) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:]) != 1 {
		return nil
	}
	// Walk the question's name.
	i, labels := 12, []string{}
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if i+1+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	i++ // the root label
	if i+4 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i:])
	qend := i + 4
	match := strings.EqualFold(strings.Join(labels, ".")+".", name) && qtype == 1
	resp := make([]byte, 0, qend+16)
	resp = append(resp, q[0], q[1]) // id
	flags := uint16(0x8400) | uint16(binary.BigEndian.Uint16(q[2:])&0x0100) | 0x0080
	if !strings.EqualFold(strings.Join(labels, ".")+".", name) {
		flags |= 3 // NXDOMAIN
	}
	resp = binary.BigEndian.AppendUint16(resp, flags)
	resp = binary.BigEndian.AppendUint16(resp, 1) // QDCOUNT
	an := uint16(0)
	if match {
		an = 1
	}
	resp = binary.BigEndian.AppendUint16(resp, an)
	resp = append(resp, 0, 0, 0, 0) // NSCOUNT, ARCOUNT
	resp = append(resp, q[12:qend]...)
	if match {
		resp = append(resp, 0xC0, 12)                  // name: pointer to the question's
		resp = binary.BigEndian.AppendUint16(resp, 1)  // A
		resp = binary.BigEndian.AppendUint16(resp, 1)  // IN
		resp = binary.BigEndian.AppendUint32(resp, 60) // TTL
		resp = binary.BigEndian.AppendUint16(resp, 4)  // RDLENGTH
		resp = append(resp, a[:]...)
	}
	return resp
}

// TestValidateURLRefusesNumericHosts is the repro of numeric hostnames
// being accepted and failing only because they did not resolve: every
// form a resolver may read as an IPv4 address, other than a.b.c.d, is
// refused by rule, in cloud and harness mode alike.
func TestValidateURLRefusesNumericHosts(t *testing.T) {
	for _, h := range []string{"127.1", "2130706433", "0x7f000001", "0177.0.0.1", "0", "0x", "0X7F.1",
		"127.0.1", "10.1", "0xa9.0xfe.0xa9.0xfe", "017700000001", "1.2.3.4.5", "127.0.0.01", "example.0x1",
		"example.123", "8.8.8.010", "8.8.2056"} {
		for name, o := range map[string]egress.Options{"cloud": {}, "harness": harness} {
			_, err := egress.ValidateURL("https://"+h+"/hook", o)
			if apierror.KindOf(err) != apierror.Invalid || !strings.Contains(err.Error(), "numeric") {
				t.Errorf("%s mode, host %q: %v, want Invalid naming the numeric form", name, h, err)
			}
		}
	}
	// A Unicode host that IDNA maps to a numeric one (fullwidth digits,
	// ideographic full stops), and so any Unicode host, is refused.
	for _, h := range []string{"１２７.０.０.１", "127。0。0。1", "ｌｏｃａｌｈｏｓｔ", "müller.de"} {
		if _, err := egress.ValidateURL("https://"+h+"/hook", egress.Options{}); apierror.KindOf(err) != apierror.Invalid {
			t.Errorf("Unicode host %q: %v, want Invalid", h, err)
		}
	}
	for _, h := range []string{"8.8.8.8", "example.com", "1e100.net", "0x7f000001.example", "123.example.org", "xn--80ak6aa92e.com"} {
		if _, err := egress.ValidateURL("https://"+h+"/hook", egress.Options{}); err != nil {
			t.Errorf("host %q refused: %v", h, err)
		}
	}
}

// TestCheckAddrRefusesTransitionRanges is the repro of 6to4, Teredo and
// IPv4-translated addresses passing CheckAddr: they are refused whole,
// whatever IPv4 address they carry; NAT64 stays judged by the address it
// embeds.
func TestCheckAddrRefusesTransitionRanges(t *testing.T) {
	for _, s := range []string{
		"2002:7f00:1::", "2002:808:808::1", // 6to4 of loopback, and even of a public address
		"2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::1", // Teredo
		"::ffff:0:7f00:1", "::ffff:0:808:808", // IPv4-translated (SIIT)
		"::7f00:1", "::808:808", // IPv4-compatible
		"2001:2::1",          // benchmarking
		"64:ff9b::7f00:1",    // NAT64 of loopback
		"64:ff9b::a9fe:a9fe", // NAT64 of the metadata address
		"192.88.99.1",        // 6to4 relay anycast
	} {
		for name, o := range map[string]egress.Options{"cloud": cloud, "harness": harness} {
			if name == "harness" && s == "64:ff9b::7f00:1" {
				continue // judged as 127.0.0.1, which the harness may reach
			}
			if err := egress.CheckAddr(netip.MustParseAddr(s), o); !errors.Is(err, egress.ErrBlocked) {
				t.Errorf("%s mode allows %s", name, s)
			}
		}
		if _, err := egress.ValidateURL("https://["+s+"]/", egress.Options{}); err == nil && strings.Contains(s, ":") {
			t.Errorf("ValidateURL accepts [%s]", s)
		}
	}
	for _, s := range []string{"64:ff9b::808:808", "::ffff:8.8.8.8", "2606:4700:4700::1111", "2001:4860:4860::8888"} {
		if err := egress.CheckAddr(netip.MustParseAddr(s), cloud); err != nil {
			t.Errorf("cloud mode refuses %s: %v", s, err)
		}
	}
}

// TestValidateURLRefusesDeceivingCharacters: a webhook URL with U+202E
// (right-to-left override) or U+200B (zero-width space) was accepted, as
// url.Parse keeps them; they make a URL read as another.
func TestValidateURLRefusesDeceivingCharacters(t *testing.T) {
	for _, u := range []string{"https://example.com/\u202e", "https://exa\u200bmple.com/", "https://example.com/a\u2066b", "https://example.com/\xff"} {
		if _, err := egress.ValidateURL(u, egress.Options{}); apierror.KindOf(err) != apierror.Invalid {
			t.Errorf("%q: %v, want Invalid", u, err)
		}
	}
	if _, err := egress.ValidateURL("https://example.com/caf\u00e9", egress.Options{}); err != nil {
		t.Errorf("a plain non-ASCII path refused: %v", err)
	}
}
