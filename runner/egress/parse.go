package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Scope is whom an allow is for: a team (EveryTeam for all of them) or the
// runners of a pool. Exactly one of Team and Pool is set.
type Scope struct {
	Team string
	Pool string
}

func (s Scope) String() string {
	if s.Pool != "" {
		return "pool=" + s.Pool
	}
	return "team=" + s.Team
}

// ParseEntries reads the entries of one allow flag (--egress-allow,
// --kafka-target-allow, --exec-allow), as the command line and the
// config file give them: one item each, the flag's commas already split.
// An entry "team=NAME:ITEM" or "pool=NAME:ITEM" opens a scope; an entry
// without one continues the scope before it, so
// "team=payments:10.1.0.0/16,api.internal:443" allows both to payments.
// Entries before any scope are for every team. add is called with each
// item and its scope; its errors are reported with the entry.
func ParseEntries(flag string, entries []string, add func(Scope, string) error) error {
	scope := Scope{Team: EveryTeam}
	var errs []error
	for _, e := range entries {
		item, bad := strings.TrimSpace(e), false
		for _, kind := range []string{"team=", "pool="} {
			rest, ok := strings.CutPrefix(item, kind)
			if !ok {
				continue
			}
			name, it, ok := strings.Cut(rest, ":")
			if !ok || name == "" {
				errs = append(errs, fmt.Errorf("%s %q: want %sNAME:ITEM", flag, e, kind))
				bad = true
				break
			}
			if kind == "team=" {
				scope = Scope{Team: name}
			} else {
				scope = Scope{Pool: name}
			}
			item = it
		}
		switch {
		case bad:
			continue
		case item == "":
			errs = append(errs, fmt.Errorf("%s %q: an empty item", flag, e))
			continue
		}
		if err := add(scope, item); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", flag, e, err))
		}
	}
	return errors.Join(errs...)
}

// Add adds rules to scope's allows in c.
func (c *Config) Add(scope Scope, rules Rules) {
	m := &c.Teams
	key := scope.Team
	if scope.Pool != "" {
		m, key = &c.Pools, scope.Pool
	}
	if *m == nil {
		*m = map[string]Rules{}
	}
	(*m)[key] = (*m)[key].merge(rules)
}

// ParseHTTPRule reads one HTTP allow: an address or range, or a host name
// (*.example.com for the names below it), with an optional port:
// 10.1.0.0/16, 10.1.2.3:8443, [fd00::/8]:443, fd00::1, api.internal:443.
func ParseHTTPRule(item string) (Rules, error) {
	hostPart, port := item, uint16(0)
	if h, p, ok := splitPort(item); ok {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return Rules{}, fmt.Errorf("port %q is not a number in 1-65535", p)
		}
		hostPart, port = h, uint16(n)
	}
	hostPart = strings.TrimSuffix(strings.TrimPrefix(hostPart, "["), "]")
	if strings.Contains(hostPart, "/") {
		pfx, err := netip.ParsePrefix(hostPart)
		if err != nil {
			return Rules{}, fmt.Errorf("%q is not an address range: %w", hostPart, err)
		}
		return Rules{Nets: []NetRule{{Prefix: pfx.Masked(), Port: port}}}, nil
	}
	if ip, err := netip.ParseAddr(hostPart); err == nil {
		ip = ip.Unmap()
		return Rules{Nets: []NetRule{{Prefix: netip.PrefixFrom(ip, ip.BitLen()), Port: port}}}, nil
	}
	if _, ok := parseLegacyIPv4(hostPart); ok {
		return Rules{}, fmt.Errorf("%q: write an address in standard form (a.b.c.d)", hostPart)
	}
	name := strings.TrimSuffix(strings.ToLower(hostPart), ".")
	if reason := checkHostName(name); reason != "" {
		return Rules{}, fmt.Errorf("%q: %s", hostPart, reason)
	}
	return Rules{Hosts: []HostRule{{Name: name, Port: port}}}, nil
}

// splitPort splits "host:port", "[v6]:port" and "[v6/len]:port"; a bare
// IPv6 address or range has no port.
func splitPort(item string) (host, port string, ok bool) {
	if strings.HasPrefix(item, "[") {
		end := strings.Index(item, "]")
		if end > 0 && strings.HasPrefix(item[end+1:], ":") {
			return item[:end+1], item[end+2:], true
		}
		return item, "", false
	}
	if strings.Count(item, ":") != 1 {
		return item, "", false
	}
	h, p, _ := strings.Cut(item, ":")
	return h, p, true
}

// ParseTopicRule reads one Kafka allow: a topic, or a prefix ending in "*"
// (payments.* for every topic that starts with "payments.").
func ParseTopicRule(item string) (Rules, error) {
	t := TopicRule{Name: item}
	if name, ok := strings.CutSuffix(item, "*"); ok {
		t = TopicRule{Name: name, Prefix: true}
	}
	if reason := checkTopicRule(t); reason != "" {
		return Rules{}, fmt.Errorf("%q: %s", item, reason)
	}
	return Rules{Topics: []TopicRule{t}}, nil
}
