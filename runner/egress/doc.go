// Package egress decides what a runner may reach on behalf of a team: the
// HTTP addresses it may dial, the Kafka topics it may produce to and the
// commands it may run. The decisions are pure (Policy); Dialer is the thin
// shell that applies the HTTP decision where it cannot be bypassed, at
// connection time, after name resolution.
//
// Invariants:
//
//   - Every decision is made for the run's owner team and the runner's pool.
//     An allow of team T, of every team ("team=*") or of the runner's pool
//     admits; nothing else does, apart from the defaults below.
//   - HTTP: an address is checked after it is resolved, as the IP that is
//     dialled, so every spelling of an address (decimal 2130706433, octal
//     0177.0.0.1, short 127.1, [::ffff:127.0.0.1], a name that resolves to
//     loopback) is judged as the address it is. IPv4 addresses embedded in
//     IPv6 ones (mapped, compatible, NAT64, 6to4) are judged as the IPv4
//     address. Loopback, private, link-local (169.254.169.254 included),
//     unspecified, multicast, shared (CGNAT) and reserved ranges are refused
//     unless an allow covers the address or names the host it was resolved
//     from; public addresses are admitted.
//   - The installation's own addresses (Kafka, Cassandra, Redis, the
//     runner's metrics listener) are refused even when an allow covers them.
//   - A name resolving to several addresses is refused when any of them is:
//     a hostile resolver cannot mix one public address in to pass.
//   - Kafka: Kafka's internal topics (__*) and Sundial's own (sundial.* and
//     <prefix>sundial.*) are never a target. A team may produce to topics
//     that start with "<team>." and to those its allows name (exact or
//     prefix); nothing else.
//   - Exec: a command runs only for a team or pool it is allowed for.
//   - A refusal is a *Refusal naming what was refused, why and for which
//     team. It never holds a URL, a header or a payload: it is safe to put
//     in a run's error.
package egress
