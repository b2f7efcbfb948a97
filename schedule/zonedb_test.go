package schedule

import (
	"archive/zip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// zoneDB is one time zone database the tests load zones from.
type zoneDB struct {
	name string
	load func(zone string) (*time.Location, error)
}

// zoneDBs returns the two databases a schedule can meet: the one the process
// resolves names with (the host's files where they exist), and the one
// compiled into a binary that imports time/tzdata, which is what a minimal
// container image without zone files uses. The compiled-in database is
// byte for byte $GOROOT/lib/time/zoneinfo.zip, so it is read from there: the
// host's files would otherwise win inside this process. The two differ in
// shape: the host's files list transitions explicitly up to 2037, the
// compiled-in ones stop decades earlier and leave the rest to the zone's
// rule string, where the standard library's zone bounds misbehave.
func zoneDBs(t testing.TB) []zoneDB {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	require.NoError(t, err, "go env GOROOT")
	path := filepath.Join(strings.TrimSpace(string(out)), "lib", "time", "zoneinfo.zip")
	r, err := zip.OpenReader(path)
	require.NoError(t, err, "the compiled-in zone database")
	t.Cleanup(func() { _ = r.Close() })
	files := make(map[string]*zip.File, len(r.File))
	for _, f := range r.File {
		files[f.Name] = f
	}
	compiledIn := func(zone string) (*time.Location, error) {
		f, ok := files[zone]
		if !ok {
			return nil, os.ErrNotExist
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		data, err := io.ReadAll(rc)
		if err != nil {
			return nil, err
		}
		return time.LoadLocationFromTZData(zone, data)
	}
	return []zoneDB{
		{name: "host", load: time.LoadLocation},
		{name: "compiled-in", load: compiledIn},
	}
}

// withZone compiles spec and swaps in the zone loaded from db, so one test
// process can run the same schedule against both databases.
func withZone(t testing.TB, spec Spec, db zoneDB) *Schedule {
	t.Helper()
	s := setup(t, spec)
	loc, err := db.load(spec.TimeZone)
	require.NoError(t, err, "load %s from the %s database", spec.TimeZone, db.name)
	s.loc = loc
	return s
}
