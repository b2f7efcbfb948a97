// Package grafana holds Sundial's Grafana dashboards as Go values: the
// dashboards under dashboards/ are generated from them (make dashboards), so
// that the PromQL of every panel sits in reviewable code, panels are laid out
// alike, and a test keeps the JSON files and the code in step.
//
// Invariants:
//   - Every query names metrics that Sundial's processes export (or the
//     recording rules of deploy/prometheus/rules define); the test in
//     package deploy checks each one against the metrics a process registers.
//   - Queries select Sundial's processes by job="sundial" and the component
//     label of the scrape targets, never by a client name, so they hold
//     however a process names its clients.
//   - Latency thresholds are drawn at the objective, 1 s.
package grafana
