package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// Resolver resolves host names; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc dials a connection, as http.Transport.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Dialer dials the connections of one team's HTTP calls, after checking
// every address the host resolves to against the policy. The address dialled
// is the one checked: the name is not resolved a second time.
type Dialer struct {
	// Policy decides; nil is the default policy.
	Policy *Policy
	// Team is the team the connections are for.
	Team string
	// Resolver resolves host names. Default net.DefaultResolver.
	Resolver Resolver
	// Timeout bounds the connection's establishment. Default 30s.
	Timeout time.Duration
}

// DialContext resolves addr's host, checks every address it resolves to,
// and dials the checked addresses in turn until one answers. A refusal is a
// *Refusal (errors.As), and nothing is dialled.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("egress: port %q: %w", portText, err)
	}
	var ips []netip.Addr
	if ip, ok := ParseIP(host); ok {
		ips = []netip.Addr{ip}
	} else {
		r := d.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		ips, err = r.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		if len(ips) == 0 {
			return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
		}
	}
	for _, ip := range ips {
		if err := d.Policy.CheckAddr(d.Team, host, ip, uint16(port)); err != nil {
			return nil, err
		}
	}
	nd := &net.Dialer{
		Timeout:   cmpOr(d.Timeout, 30*time.Second),
		KeepAlive: 30 * time.Second,
		// The address connected to is checked once more: nothing between
		// the check above and the connect may change it.
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("egress: dialled address %q: %w", address, err)
			}
			return d.Policy.CheckAddr(d.Team, host, ap.Addr(), ap.Port())
		},
	}
	var errs []error
	for _, ip := range ips {
		conn, err := nd.DialContext(ctx, network, netip.AddrPortFrom(ip.Unmap(), uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
