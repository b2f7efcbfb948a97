// Package deps holds the one set of defaults for what every component is
// given rather than reaching for: a logger and a clock, and, in its
// sub-package metricdeps (so that libraries stay free of Prometheus), a
// metrics registerer. Config.withDefaults of each component calls these, so that a
// component built without one behaves the same whichever package it is.
//
// # Invariants
//
//   - No global state is used as a default: a nil logger discards (never
//     slog.Default), so two components, or two tests, never share one by
//     accident; metricdeps follows the same rule for registerers.
//   - The default clock is time.Now: the only one a process has. Tests
//     inject their own.
//   - A value given is returned as it is.
package deps
