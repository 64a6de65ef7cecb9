// Package egress builds the HTTP client for every outbound call to a URL a
// user supplied (webhooks, their ping probes), refusing server-side request
// forgery: the address check runs in net.Dialer.Control, after
// DNS resolution and for every address the dialer tries, so a name that
// resolves (or re-resolves, DNS rebinding) to an internal address is refused
// at connect time; redirects are never followed, so a public URL cannot
// bounce the request inward; proxies from the environment are ignored, so
// the check sees the real destination.
package egress

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/ident"
)

// MaxURLLength bounds a user-supplied URL.
const MaxURLLength = 2048

// DefaultTimeout bounds a whole request when Options.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// Options says what a client may reach. The zero value is cloud mode:
// https only, public addresses only.
type Options struct {
	// AllowLoopback lets the client reach loopback addresses (127.0.0.0/8,
	// ::1, and names such as localhost): the local harness, whose receivers
	// run on the same machine. Private, link-local and metadata addresses
	// stay refused.
	AllowLoopback bool
	// AllowHTTP lets ValidateURL accept http:// URLs (the local harness).
	AllowHTTP bool
	// Timeout bounds each request (DefaultTimeout when zero).
	Timeout time.Duration
	// Resolver resolves names for the dialer; nil is net.DefaultResolver.
	// Tests give one that answers without the system's DNS.
	Resolver *net.Resolver
}

// ErrBlocked is the cause of every refusal of a destination (address or
// scheme).
var ErrBlocked = errors.New("egress: destination address refused")

// BlockedError says which address was refused and why; errors.Is(err,
// ErrBlocked) holds for it.
type BlockedError struct {
	Addr   netip.Addr
	Reason string
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("egress: destination %s refused: %s", e.Addr, e.Reason)
}

// Is makes errors.Is(err, ErrBlocked) true.
func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// blocked lists the IPv4 and IPv6 ranges no user-supplied URL may reach,
// with the reason given back. Loopback is handled apart (AllowLoopback).
var blocked = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("169.254.169.254/32"), "cloud metadata"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("192.0.2.0/24"), "reserved"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "reserved"},
	{netip.MustParsePrefix("198.51.100.0/24"), "reserved"},
	{netip.MustParsePrefix("203.0.113.0/24"), "reserved"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved or broadcast"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "NAT64 local-use"},
	{netip.MustParsePrefix("100::/64"), "discard"},
	{netip.MustParsePrefix("2001:db8::/32"), "reserved"},
	{netip.MustParsePrefix("2001:2::/48"), "benchmarking"},
	// Transition ranges, refused whole rather than by the IPv4 address
	// they carry. Each embeds an IPv4 address that a relay, tunnel or
	// translator on the path may deliver to (6to4 in bits 16–47, Teredo
	// its server in bits 32–63 and its client XOR-ed in the last 32,
	// SIIT and IPv4-compatible in the last 32), and each carries it in its
	// own layout, some of them obfuscated: checking the embedded address
	// means one decoder per scheme that must be right, while refusing the
	// range needs none. Nothing is lost: 6to4 (RFC 7526) and
	// IPv4-compatible addresses (RFC 4291) are deprecated, Teredo is a
	// client-side tunnel no webhook receiver is served from, and SIIT's
	// translated form never appears in public DNS. The IPv4-mapped form
	// (::ffff:0:0/96) is not here: the kernel dials it as the IPv4 address
	// itself, so CheckAddr judges it as that address (Unmap); NAT64's
	// 64:ff9b::/96 is not here either, because an IPv6-only network with
	// DNS64 reaches every IPv4-only receiver through it: its embedded
	// address is checked instead (embedding).
	{netip.MustParsePrefix("2002::/16"), "6to4 (embeds an IPv4 address)"},
	{netip.MustParsePrefix("2001::/32"), "Teredo (embeds an IPv4 address)"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "IPv4-translated (embeds an IPv4 address)"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible (embeds an IPv4 address)"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// Embedding prefixes: an IPv6 address in them carries an IPv4 address in its
// last 32 bits that the network routes to (NAT64's well-known prefix), so
// the embedded address is checked too. The other transition ranges are
// refused whole (blocked).
var embedding = []netip.Prefix{
	netip.MustParsePrefix("64:ff9b::/96"),
}

// CheckAddr reports whether a may be dialled under o: nil, or a
// *BlockedError. IPv4-mapped IPv6 addresses are judged as their IPv4 form.
func CheckAddr(a netip.Addr, o Options) error {
	if !a.IsValid() {
		return &BlockedError{Addr: a, Reason: "invalid address"}
	}
	a = a.Unmap().WithZone("")
	// Loopback first: ::1 also lies in ::/96, refused below.
	if a.IsLoopback() {
		if o.AllowLoopback {
			return nil
		}
		return &BlockedError{Addr: a, Reason: "loopback"}
	}
	if a.Is6() {
		for _, p := range embedding {
			if p.Contains(a) && a != netip.IPv6Unspecified() {
				b := a.As16()
				v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
				if err := CheckAddr(v4, o); err != nil {
					return &BlockedError{Addr: a, Reason: "embeds " + v4.String() + ": " + err.(*BlockedError).Reason}
				}
			}
		}
	}
	for _, b := range blocked {
		if b.prefix.Contains(a) {
			return &BlockedError{Addr: a, Reason: b.reason}
		}
	}
	return nil
}

// control is the dialer's Control: address is the resolved "ip:port" about
// to be connected to.
func control(o Options) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		if network != "tcp4" && network != "tcp6" {
			return fmt.Errorf("egress: network %s refused: %w", network, ErrBlocked)
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("egress: dial address %q: %w", address, ErrBlocked)
		}
		return CheckAddr(ap.Addr(), o)
	}
}

// NewClient returns an http.Client for user-supplied URLs under o: every
// connection's address checked after resolution, no redirects followed (the
// 3xx response is returned as is), no proxy, o.Timeout per request.
func NewClient(o Options) *http.Client {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	d := &net.Dialer{
		Timeout:  timeout,
		Resolver: o.Resolver,
		Control:  control(o),
	}
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
	}
	return &http.Client{
		Transport:     &schemeCheck{base: t, allowHTTP: o.AllowHTTP},
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// ValidateURL parses a user-supplied URL and refuses what the client must
// never be pointed at, before anything is stored: longer than MaxURLLength,
// invalid UTF-8 or holding a character ident.UnsafeRune refuses, not
// absolute, a scheme other than https (or http with AllowHTTP), user
// info, a fragment, no host, a host that is not ASCII, a numeric host other
// than a dotted-decimal IPv4 address (numericHost), a literal address CheckAddr refuses, or a
// localhost name without AllowLoopback. Names are not resolved here (the
// dialer checks what they resolve to at each connection). Errors are
// Invalid *apierror.Error.
func ValidateURL(raw string, o Options) (*url.URL, error) {
	if len(raw) > MaxURLLength {
		return nil, apierror.New(apierror.Invalid, "url is longer than %d characters", MaxURLLength)
	}
	if !utf8.ValidString(raw) {
		return nil, apierror.New(apierror.Invalid, "url must be valid UTF-8")
	}
	if c, bad := ident.UnsafeRune(raw); bad {
		// url.Parse refuses ASCII controls but keeps U+202E and U+200B,
		// which make a URL read as another.
		return nil, apierror.New(apierror.Invalid, "%s", ident.UnsafeRuneError("url", c))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, apierror.New(apierror.Invalid, "url is not a valid URL")
	}
	switch {
	case !u.IsAbs() || u.Opaque != "":
		return nil, apierror.New(apierror.Invalid, "url must be an absolute https URL")
	case u.Scheme != "https" && !(o.AllowHTTP && u.Scheme == "http"):
		if o.AllowHTTP {
			return nil, apierror.New(apierror.Invalid, "url scheme must be https or http")
		}
		return nil, apierror.New(apierror.Invalid, "url scheme must be https")
	case u.User != nil:
		return nil, apierror.New(apierror.Invalid, "url must not carry user info")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, apierror.New(apierror.Invalid, "url must not carry a fragment")
	case u.Hostname() == "":
		return nil, apierror.New(apierror.Invalid, "url has no host")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			// IDNA maps fullwidth digits and ideographic full stops to
			// ASCII ("１２７。０。０。１" is 127.0.0.1 to a browser or a
			// proxy), so a Unicode host could be an address in disguise;
			// Go's resolver looks such names up unmapped, so none works
			// today anyway. An internationalized name is written xn--.
			return nil, apierror.New(apierror.Invalid, "url host must be ASCII; write an internationalized name in its xn-- (punycode) form")
		}
	}
	if numericHost(host) {
		if _, err := netip.ParseAddr(host); err != nil {
			// Only the dotted-decimal form of four parts is an address
			// here; the others are refused whoever would resolve them.
			return nil, apierror.New(apierror.Invalid, "url host is a numeric form of an IPv4 address other than a.b.c.d; write the address as four decimal parts, or use a name")
		}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if err := CheckAddr(a, o); err != nil {
			return nil, apierror.New(apierror.Invalid, "url host is a refused address (%s)", err.(*BlockedError).Reason)
		}
	} else if !o.AllowLoopback && (host == "localhost" || strings.HasSuffix(host, ".localhost")) {
		// RFC 6761: these names are loopback wherever they are resolved.
		return nil, apierror.New(apierror.Invalid, "url host is a refused address (loopback)")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, apierror.New(apierror.Invalid, "url port is out of range")
		}
	}
	return u, nil
}

// numericHost reports whether host (lower case, no trailing dot, not an
// IPv6 literal) is one that some resolver reads as an IPv4 address rather
// than a name: its last label is all decimal digits, or 0x and hex digits.
// That is the WHATWG URL standard's "ends in a number" rule, which covers
// every form inet_aton(3) accepts — one to four parts, each decimal, octal
// with a leading 0, or hex with 0x: "127.1", "2130706433", "0x7f000001",
// "0177.0.0.1", "0". Go's resolver would look such a host up as a name
// and the dialer would still judge what it reached, but a proxy, a
// browser-based client or a libc resolver on the way reads it as the
// address, so the rule refuses it when the URL is given instead of relying
// on how it fails to resolve. No top-level domain is numeric, so no name
// is lost.
func numericHost(host string) bool {
	if strings.Contains(host, ":") {
		return false // an IPv6 literal (brackets already removed)
	}
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	digits := last
	if strings.HasPrefix(last, "0x") {
		digits = last[2:]
		for i := 0; i < len(digits); i++ {
			if !strings.ContainsRune("0123456789abcdef", rune(digits[i])) {
				return false
			}
		}
		return true // "0x" alone is 0 to inet_aton
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}

// schemeCheck refuses plain http unless allowed: ValidateURL refuses it
// when a URL is stored, and this holds the line for any URL the client is
// handed later (a row written before a policy change, a caller's mistake).
type schemeCheck struct {
	base      *http.Transport
	allowHTTP bool
}

func (s *schemeCheck) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != "https" && !(s.allowHTTP && r.URL.Scheme == "http") {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, fmt.Errorf("egress: scheme %q refused: %w", r.URL.Scheme, ErrBlocked)
	}
	return s.base.RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport.
func (s *schemeCheck) CloseIdleConnections() { s.base.CloseIdleConnections() }
