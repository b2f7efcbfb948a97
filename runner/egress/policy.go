package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Kinds of egress, in refusals and metrics.
const (
	KindHTTP  = "http"
	KindKafka = "kafka"
	KindExec  = "exec"
)

// EveryTeam is the team name of an allow that applies to every team.
const EveryTeam = "*"

// NetRule admits the addresses of a range, on one port or on any (Port 0).
type NetRule struct {
	Prefix netip.Prefix
	Port   uint16
}

// HostRule admits whatever a host name resolves to, on one port or on any
// (Port 0). Name is lower case without a trailing dot; "*.example.com"
// admits every name below example.com (not example.com itself).
type HostRule struct {
	Name string
	Port uint16
}

// TopicRule admits one Kafka topic, or every topic that starts with Name
// when Prefix is set.
type TopicRule struct {
	Name   string
	Prefix bool
}

// Rules is what one scope (a team, every team, a pool) is allowed beyond
// the defaults.
type Rules struct {
	Nets   []NetRule
	Hosts  []HostRule
	Topics []TopicRule
	// Exec are the command names the scope may run.
	Exec []string
}

func (r Rules) merge(o Rules) Rules {
	r.Nets = append(slices.Clip(r.Nets), o.Nets...)
	r.Hosts = append(slices.Clip(r.Hosts), o.Hosts...)
	r.Topics = append(slices.Clip(r.Topics), o.Topics...)
	r.Exec = append(slices.Clip(r.Exec), o.Exec...)
	return r
}

// Config is an egress policy.
type Config struct {
	// Teams are the allows of each team; EveryTeam's apply to every team.
	Teams map[string]Rules
	// Pools are the allows of the runners of each pool: they apply to every
	// run a runner of that pool executes.
	Pools map[string]Rules
	// Pool is the pool of the runner that applies the policy.
	Pool string
	// Own are the installation's own addresses (Kafka, Cassandra, Redis,
	// the runner's listeners): never dialled, whatever is allowed. Port 0
	// stands for every port of the address.
	Own []netip.AddrPort
	// TopicPrefix is the installation's topic prefix: <TopicPrefix>sundial.*
	// are its own topics.
	TopicPrefix string
}

// Validate reports every bad field.
func (c Config) Validate() error {
	var errs []error
	check := func(scope string, r Rules) {
		for _, n := range r.Nets {
			if !n.Prefix.IsValid() {
				errs = append(errs, fmt.Errorf("egress config: %s: an invalid address range", scope))
			}
		}
		for _, h := range r.Hosts {
			if reason := checkHostName(h.Name); reason != "" {
				errs = append(errs, fmt.Errorf("egress config: %s: host %q: %s", scope, h.Name, reason))
			}
		}
		for _, t := range r.Topics {
			if reason := checkTopicRule(t); reason != "" {
				errs = append(errs, fmt.Errorf("egress config: %s: topic %q: %s", scope, t.Name, reason))
			}
		}
		for _, e := range r.Exec {
			if e == "" {
				errs = append(errs, fmt.Errorf("egress config: %s: an empty command name", scope))
			}
		}
	}
	for _, team := range sortedKeys(c.Teams) {
		check("Teams["+team+"]", c.Teams[team])
	}
	for _, pool := range sortedKeys(c.Pools) {
		check("Pools["+pool+"]", c.Pools[pool])
	}
	for _, a := range c.Own {
		if !a.Addr().IsValid() {
			errs = append(errs, errors.New("egress config: Own: an invalid address"))
		}
	}
	return errors.Join(errs...)
}

// Policy is a validated Config. The zero Policy (and a nil *Policy) is the
// default: no allows, no own addresses, no topic prefix.
type Policy struct {
	cfg Config
}

// New validates cfg and returns its Policy.
func New(cfg Config) (*Policy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Policy{cfg: cfg}
	p.cfg.Own = slices.Clone(cfg.Own)
	for i, a := range p.cfg.Own {
		p.cfg.Own[i] = netip.AddrPortFrom(a.Addr().Unmap().WithZone(""), a.Port())
	}
	return p, nil
}

// Refusal is a decision not to reach something. Its message names the
// thing refused (an address, a topic, a command), never a URL or a header.
type Refusal struct {
	// Kind is KindHTTP, KindKafka or KindExec.
	Kind string
	// Team is the team the decision was made for.
	Team string
	// What is the refused address, topic or command.
	What string
	// Reason says what makes it refused ("loopback", "one of Sundial's own
	// topics"); empty when it is merely not allowed.
	Reason string
	// Hint says how an operator allows it, if one can.
	Hint string
}

func (r *Refusal) Error() string {
	team := r.Team
	if team == "" {
		team = `""`
	}
	if r.Reason != "" {
		return fmt.Sprintf("egress: %s is %s, not allowed for team %s", r.What, r.Reason, team)
	}
	return fmt.Sprintf("egress: %s is not allowed for team %s (%s)", r.What, team, r.Hint)
}

// rules returns what team may reach on this policy's pool.
func (p *Policy) rules(team string) Rules {
	if p == nil {
		return Rules{}
	}
	var r Rules
	if team != "" {
		r = r.merge(p.cfg.Teams[team])
	}
	r = r.merge(p.cfg.Teams[EveryTeam])
	return r.merge(p.cfg.Pools[p.cfg.Pool])
}

// CheckAddr decides whether team may dial ip:port, reached by resolving
// host (the name as written in the URL; an address literal for none).
// It returns nil or a *Refusal.
func (p *Policy) CheckAddr(team, host string, ip netip.Addr, port uint16) error {
	ip = ip.Unmap().WithZone("")
	refuse := func(reason string) error {
		return &Refusal{Kind: KindHTTP, Team: team, What: ip.String(), Reason: reason}
	}
	if p != nil {
		for _, own := range p.cfg.Own {
			if own.Addr() == ip && (own.Port() == 0 || own.Port() == port) {
				return refuse("one of this installation's own addresses")
			}
		}
	}
	r := p.rules(team)
	v4, embedded := Embedded(ip)
	for _, n := range r.Nets {
		if n.Port != 0 && n.Port != port {
			continue
		}
		if n.Prefix.Contains(ip) || (embedded && n.Prefix.Contains(v4)) {
			return nil
		}
	}
	if name := normalHost(host); name != "" {
		for _, h := range r.Hosts {
			if (h.Port == 0 || h.Port == port) && hostMatches(h.Name, name) {
				return nil
			}
		}
	}
	if class := Classify(ip); class != "" {
		return refuse(class)
	}
	return nil
}

// CheckTopic decides whether team may produce to topic. It returns nil or
// a *Refusal.
func (p *Policy) CheckTopic(team, topic string) error {
	refuse := func(reason string) error {
		return &Refusal{Kind: KindKafka, Team: team, What: "topic " + topic, Reason: reason}
	}
	prefix := ""
	if p != nil {
		prefix = p.cfg.TopicPrefix
	}
	switch {
	case strings.HasPrefix(topic, "__"):
		return refuse("a Kafka internal topic")
	case strings.HasPrefix(topic, prefix+"sundial.") || strings.HasPrefix(topic, "sundial."):
		return refuse("one of Sundial's own topics")
	case team != "" && team != EveryTeam && strings.HasPrefix(topic, team+"."):
		return nil
	}
	for _, t := range p.rules(team).Topics {
		if topic == t.Name || (t.Prefix && strings.HasPrefix(topic, t.Name)) {
			return nil
		}
	}
	return &Refusal{Kind: KindKafka, Team: team, What: "topic " + topic,
		Hint: fmt.Sprintf("a team writes the topics that start with %q and those sundial runner --kafka-target-allow allows it", team+".")}
}

// CheckExec decides whether team may run the command allowed as name. It
// returns nil or a *Refusal.
func (p *Policy) CheckExec(team, name string) error {
	if slices.Contains(p.rules(team).Exec, name) {
		return nil
	}
	return &Refusal{Kind: KindExec, Team: team, What: "command " + strconv.Quote(name), Hint: "sundial runner --exec-allow"}
}

// ExecNames returns every command name some scope of the policy allows,
// sorted, for the start-up log.
func (p *Policy) ExecNames() []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, m := range []map[string]Rules{p.cfg.Teams, p.cfg.Pools} {
		for _, r := range m {
			out = append(out, r.Exec...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// AllowsLoopbackForEveryone reports whether every team (or this runner's
// pool) may dial loopback, an opt-out worth a warning at start.
func (p *Policy) AllowsLoopbackForEveryone() bool {
	if p == nil {
		return false
	}
	for _, n := range p.rules("").Nets {
		if n.Prefix.Contains(netip.MustParseAddr("127.0.0.1")) {
			return true
		}
	}
	return false
}

func normalHost(host string) string {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return ""
	}
	return host
}

func hostMatches(rule, name string) bool {
	if suffix, ok := strings.CutPrefix(rule, "*"); ok {
		return strings.HasSuffix(name, suffix) && len(name) > len(suffix)
	}
	return rule == name
}

func checkHostName(name string) string {
	n := strings.TrimPrefix(name, "*.")
	switch {
	case n == "":
		return "empty"
	case n != strings.ToLower(n):
		return "not lower case"
	case strings.HasSuffix(n, "."):
		return "ends with a dot"
	case strings.ContainsAny(n, "*/:[] "):
		return "not a host name (a wildcard is allowed only as the first label, *.example.com)"
	}
	return ""
}

func checkTopicRule(t TopicRule) string {
	switch {
	case t.Name == "" && !t.Prefix:
		return "empty"
	case strings.Trim(t.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "":
		return "has characters outside [A-Za-z0-9._-]"
	case strings.HasPrefix(t.Name, "__") || strings.HasPrefix(t.Name, "sundial."):
		return "Kafka's internal topics and Sundial's own are never a target"
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// LoopbackForEveryTeam is a Config that lets every team's HTTP targets reach
// loopback addresses: for a development pipeline, the bench and tests, whose
// downstreams listen there. An opt-out of the default, to log at start.
func LoopbackForEveryTeam() Config {
	return Config{Teams: map[string]Rules{EveryTeam: {Nets: []NetRule{
		{Prefix: netip.MustParsePrefix("127.0.0.0/8")}, {Prefix: netip.MustParsePrefix("::1/128")},
	}}}}
}
