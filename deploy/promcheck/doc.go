// Package promcheck checks Sundial's dashboards and alert rules: it extracts
// every PromQL expression from the Grafana dashboards (deploy/grafana) and
// the Prometheus rule files (deploy/prometheus/rules), parses each with
// Prometheus's own PromQL parser, lists the metrics each one reads, and runs a
// real Prometheus against given scrape targets to see which queries return
// data and which alerts fire.
//
// Invariants:
//   - A query is checked as Prometheus will run it: Grafana's variables are
//     replaced by values of the kind Grafana sends ($__rate_interval by a
//     duration), nothing else is rewritten.
//   - The Prometheus started by Start listens on 127.0.0.1 only, keeps its
//     data in a directory the caller owns, and is killed by Stop, which
//     returns once the process has exited, or, on Linux, when the process
//     that started it dies.
//
// Dependencies: github.com/prometheus/prometheus/promql/parser, the parser
// of Prometheus itself (so a query that passes here parses in Prometheus),
// and a YAML decoder for rule files. The prometheus binary is Debian's
// package "prometheus" (promtool comes with it).
package promcheck
