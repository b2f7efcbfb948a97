package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/runner/egress"
	"github.com/sundialhq/sundial/runner/target"
)

// egressFlags say what a runner may reach for each team: HTTP addresses,
// Kafka topics, commands. An entry team=NAME:ITEM or pool=NAME:ITEM names
// whom it is for; an entry without one continues the one before it on the
// same flag; entries before any are for every team (team=* says so too).
func egressFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "egress-allow", Usage: "HTTP addresses a team's (or a pool's) targets may reach beyond the public internet: " +
			"a range, an address or a host name (*.example.com for the names below it), each with an optional port; " +
			"e.g. 'team=payments:10.1.0.0/16,api.internal:443' or 'pool=batch:[fd00::/8]:8443'; an entry without team=/pool= continues the one before it, " +
			"entries before any (or team=*) are for every team. Default: none, so loopback, private, link-local (169.254.169.254), CGNAT, multicast and " +
			"unspecified addresses are refused, after name resolution and on every redirect; the installation's own addresses (Kafka, Cassandra, Redis, " +
			"--metrics-addr) are refused whatever is allowed", Sources: envVar("egress-allow")},
		&cli.StringSliceFlag{Name: "kafka-target-allow", Usage: "Kafka topics a team's (or a pool's) Kafka targets may write besides its own (those starting with '<team>.'): " +
			"a topic, or a prefix ending in * ; e.g. 'team=payments:ledger.in,shared.payments.*'; same scopes as --egress-allow. Kafka's internal topics " +
			"(__*) and Sundial's own (<prefix>sundial.*) are never a target", Sources: envVar("kafka-target-allow")},
		&cli.StringSliceFlag{Name: "exec-allow", Usage: "commands exec targets may run, [team=NAME:|pool=NAME:]name=/absolute/path, comma-separated; a job names the command, never a path; " +
			"e.g. 'team=ops:rsync=/usr/bin/rsync'. An entry without team=/pool= continues the one before it; entries before any (or team=*) are allowed to EVERY team. " +
			"Default: none, exec targets are refused", Sources: envVar("exec-allow")},
	}
}

// runnerEgress reads egressFlags into the runner's egress policy and its
// exec target (nil when no command is allowed).
func runnerEgress(cmd *cli.Command) (egress.Config, *target.Exec, error) {
	var cfg egress.Config
	addWith := func(parse func(string) (egress.Rules, error)) func(egress.Scope, string) error {
		return func(s egress.Scope, item string) error {
			r, err := parse(item)
			if err == nil {
				cfg.Add(s, r)
			}
			return err
		}
	}
	bad := []error{
		egress.ParseEntries("--egress-allow", cmd.StringSlice("egress-allow"), addWith(egress.ParseHTTPRule)),
		egress.ParseEntries("--kafka-target-allow", cmd.StringSlice("kafka-target-allow"), addWith(egress.ParseTopicRule)),
	}
	exe, err := execTarget(&cfg, cmd.StringSlice("exec-allow"), cmd.Int("exec-max-output"))
	bad = append(bad, err)
	return cfg, exe, errors.Join(bad...)
}

// execTarget reads --exec-allow: the exec target of every command it names
// (nil when it names none), and which scope may run each, into cfg. A name
// has one path, whoever it is allowed to.
func execTarget(cfg *egress.Config, allow []string, maxOutput int) (*target.Exec, error) {
	paths := map[string]string{}
	err := egress.ParseEntries("--exec-allow", allow, func(s egress.Scope, item string) error {
		name, path, ok := strings.Cut(item, "=")
		switch {
		case !ok || name == "" || path == "":
			return errors.New("want name=/absolute/path")
		case paths[name] != "" && paths[name] != path:
			return fmt.Errorf("%s is allowed as %s and as %s: a name has one path", name, paths[name], path)
		}
		paths[name] = path
		cfg.Add(s, egress.Rules{Exec: []string{name}})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, nil
	}
	exe, err := target.NewExec(target.ExecConfig{Allowed: paths, MaxOutput: maxOutput})
	if err != nil {
		return nil, fmt.Errorf("--exec-allow: %w", err)
	}
	return exe, nil
}

// ownAddresses are the addresses of the installation a runner talks to or
// serves (Kafka's seeds, Cassandra's contact points, Redis, the metrics
// listener), resolved now, for the egress policy to refuse. A listener on
// every interface stands for the port on loopback and on each interface
// address.
func ownAddresses(ctx context.Context, cmd *cli.Command, logger *slog.Logger) []netip.AddrPort {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out []netip.AddrPort
	add := func(hostport string, defaultPort uint16) {
		host, portText, err := net.SplitHostPort(hostport)
		port := defaultPort
		if err != nil {
			host = hostport
		} else if p, err := strconv.ParseUint(portText, 10, 16); err == nil {
			port = uint16(p)
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			out = append(out, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), netip.AddrPortFrom(netip.IPv6Loopback(), port))
			addrs, _ := net.InterfaceAddrs()
			for _, a := range addrs {
				if p, err := netip.ParsePrefix(a.String()); err == nil {
					out = append(out, netip.AddrPortFrom(p.Addr(), port))
				}
			}
			return
		}
		if ip, ok := egress.ParseIP(host); ok {
			out = append(out, netip.AddrPortFrom(ip, port))
			return
		}
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			logger.Warn("egress: an address of the installation does not resolve; it is not refused by address", "host", host, "err", err)
		}
		for _, ip := range ips {
			out = append(out, netip.AddrPortFrom(ip, port))
		}
	}
	for _, b := range cmd.StringSlice("kafka-brokers") {
		add(b, 9092)
	}
	for _, h := range cmd.StringSlice("cassandra-hosts") {
		add(h, 9042)
	}
	for _, a := range append(strings.Split(cmd.String("redis-addr"), ","), cmd.StringSlice("redis-sentinel-addrs")...) {
		if a = strings.TrimSpace(a); a != "" {
			add(a, 6379)
		}
	}
	if a := cmd.String("metrics-addr"); a != "" {
		add(a, 0)
	}
	return out
}

// logEgress says at start what the policy opens beyond the defaults that
// every team gets: loopback for everyone, and commands.
func logEgress(logger *slog.Logger, p *egress.Policy) {
	if p.AllowsLoopbackForEveryone() {
		logger.Warn("egress: every team's HTTP targets may reach loopback addresses (--egress-allow); fit for development only")
	}
	if names := p.ExecNames(); len(names) > 0 {
		logger.Info("egress: exec targets may run these commands, for the teams and pools --exec-allow names", "commands", names)
	}
}
