package testenv

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
)

// recorder stands in for *testing.T to observe whether a helper fails or
// skips. The embedded TB is nil: calling anything not overridden panics.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }
func (r *recorder) Skip(args ...any)                  { r.skip = fmt.Sprint(args...) }

func TestUnavailableFailsUnderCI(t *testing.T) {
	t.Setenv("CI", "true")
	r := &recorder{}
	unavailable(r, "Kafka", EnvKafka, "no Docker engine")
	assert.Contains(t, r.fatal, "make stack-up")
	assert.Contains(t, r.fatal, EnvKafka)
	assert.Empty(t, r.skip)
}

func TestUnavailableSkipsOutsideCI(t *testing.T) {
	t.Setenv("CI", "")
	r := &recorder{}
	unavailable(r, "Redis", EnvRedis, "no Docker engine")
	assert.Empty(t, r.fatal)
	assert.Contains(t, r.skip, "make stack-up")
}

func TestSlugIsAValidNamePart(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^[a-z0-9_]*$`)
	for _, name := range []string{"TestStore/Cassandra/bucket_10000", "Test-x.y", "___", "ÄÖÜ weird"} {
		s := slug(name, 30)
		assert.Regexp(t, valid, s, name)
		assert.LessOrEqual(t, len(s), 30)
	}
	assert.Equal(t, "teststore_cassandra", slug("TestStore/Cassandra", 30))
}

func TestAddressesSplitsAndTrims(t *testing.T) {
	t.Setenv(EnvKafka, " 127.0.0.1:1 , ,127.0.0.1:2")
	assert.Equal(t, []string{"127.0.0.1:1", "127.0.0.1:2"}, addresses(EnvKafka))
	t.Setenv(EnvKafka, "")
	assert.Nil(t, addresses(EnvKafka))
}
