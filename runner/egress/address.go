package egress

import (
	"net/netip"
	"strconv"
	"strings"
)

// class is a range refused by default, and what to call it.
type class struct {
	prefix netip.Prefix
	name   string
}

// refused are the ranges refused by default, most specific first.
var refused = func() []class {
	out := []class{}
	add := func(name string, prefixes ...string) {
		for _, p := range prefixes {
			out = append(out, class{netip.MustParsePrefix(p), name})
		}
	}
	add("unspecified", "0.0.0.0/8", "::/128")
	add("loopback", "127.0.0.0/8", "::1/128")
	add("private", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
	add("link-local", "169.254.0.0/16", "fe80::/10")
	add("site-local", "fec0::/10")
	add("shared address space (CGNAT)", "100.64.0.0/10")
	add("multicast", "224.0.0.0/4", "ff00::/8")
	add("reserved", "240.0.0.0/4", "192.0.0.0/24", "198.18.0.0/15")
	return out
}()

// Classify returns the name of the range refused by default that ip is in
// ("loopback", "private", "link-local", ...), judging an IPv4 address
// embedded in an IPv6 one as the IPv4 address; "" for an address that is
// admitted by default.
func Classify(ip netip.Addr) string {
	if !ip.IsValid() {
		return "not a valid address"
	}
	ip = ip.Unmap().WithZone("")
	if v4, ok := Embedded(ip); ok {
		if c := Classify(v4); c != "" {
			return c
		}
	}
	for _, c := range refused {
		if c.prefix.Contains(ip) {
			return c.name
		}
	}
	return ""
}

var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4  = netip.MustParsePrefix("2002::/16")
	compat  = netip.MustParsePrefix("::/96")
	mapped6 = netip.MustParsePrefix("::ffff:0:0/96")
)

// Embedded returns the IPv4 address an IPv6 address carries: IPv4-mapped
// (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::a.b.c.d)
// and 6to4 (2002:aabb:ccdd::).
func Embedded(ip netip.Addr) (netip.Addr, bool) {
	if !ip.Is6() {
		return netip.Addr{}, false
	}
	ip = ip.WithZone("")
	b := ip.As16()
	switch {
	case mapped6.Contains(ip), nat64.Contains(ip):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case compat.Contains(ip) && ip != netip.IPv6Unspecified() && ip != netip.IPv6Loopback():
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixTo4.Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// ParseIP reads host as an IP address in any spelling a resolver might
// accept: a standard IPv4 or IPv6 address (in brackets or not, with a zone
// or not), or a legacy IPv4 form of inet_aton (decimal 2130706433, octal
// 0177.0.0.1, hexadecimal 0x7f000001, short 127.1). It reports false for a
// host name.
func ParseIP(host string) (netip.Addr, bool) {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip, true
	}
	return parseLegacyIPv4(strings.TrimSuffix(h, "."))
}

// parseLegacyIPv4 reads the forms inet_aton accepts: one to four parts,
// each decimal, octal (leading 0) or hexadecimal (0x); the last part fills
// the bytes the others leave.
func parseLegacyIPv4(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		v, ok := parseLegacyPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var out uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		out |= v << (8 * (3 - i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	out |= last
	return netip.AddrFrom4([4]byte{byte(out >> 24), byte(out >> 16), byte(out >> 8), byte(out)}), true
}

func parseLegacyPart(p string) (uint64, bool) {
	base := 10
	switch {
	case p == "":
		return 0, false
	case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true
		}
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	v, err := strconv.ParseUint(p, base, 32)
	return v, err == nil
}
