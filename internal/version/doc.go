// Package version is Sundial's release version, the one value `sundial
// version`, the runner's and workers' announcements and the CHANGELOG
// agree on. Releases follow semantic versioning: before 1.0.0 a minor
// release may change the API and the wire format (CHANGELOG.md says how to
// upgrade), a patch release never does.
package version
