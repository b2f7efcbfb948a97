package worker

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/sundialhq/sundial/internal/configfile"
	"github.com/sundialhq/sundial/internal/connect"
)

// The settings a team's worker reads from its command line, the
// environment and the YAML file, named as the CLI names them
// (docs/configuration.md): the setting "api-url" is the flag --api-url, the
// variable SUNDIAL_API_URL and the key api-url of the file, at its top
// level or in its section "worker".
const (
	KeyConfig        = "config"
	KeyAPIURL        = "api-url"
	KeyAPIToken      = "api-token"
	KeyAPITokenFile  = "api-token-file"
	KeyAPICAFile     = "api-tls-ca-file"
	KeyAPICertFile   = "api-tls-cert-file"
	KeyAPIKeyFile    = "api-tls-key-file"
	KeyAPIServerName = "api-tls-server-name"
	KeyPool          = "pool"
	KeyWorkerID      = "worker-id"
	KeyConcurrency   = "concurrency"
)

// settings are the keys Load reads, with their usage.
var settings = []struct{ key, usage string }{
	{KeyAPIURL, "base URL of the control-plane API, whose worker gateway the worker polls"},
	{KeyAPIToken, "the team's bearer token (role operator); prefer the environment or --api-token-file"},
	{KeyAPITokenFile, "file holding the team's bearer token"},
	{KeyAPICAFile, "PEM bundle of the authorities that sign the API's certificate (default: the system's)"},
	{KeyAPICertFile, "PEM client certificate, for mutual TLS with the API (with --api-tls-key-file)"},
	{KeyAPIKeyFile, "PEM key of --api-tls-cert-file"},
	{KeyAPIServerName, "name the API's certificate must carry (default: the host of --api-url)"},
	{KeyPool, "the pool whose jobs' runs the worker executes (default \"default\")"},
	{KeyWorkerID, "name of this worker in run events (default: host name and process id)"},
	{KeyConcurrency, "attempts executing at once (default 16)"},
}

// Flags defines the worker's settings (and --config) on fs, and returns
// the function that, once fs is parsed, gives the Config they make: for
// each setting the flag when it is on the command line, else its
// SUNDIAL_* variable when set and not empty, else the file's value (its
// section "worker" first, then its top level), else the default. The file
// is --config's, else SUNDIAL_CONFIG's. A key of the file's section
// "worker" that is no setting is an error; a top-level key the worker
// does not have is another program's (the CLI's) and is left to it.
func Flags(fs *flag.FlagSet) func() (Config, error) { return flagsWith(fs, os.Getenv) }

// flagsWith is Flags reading the environment through getenv.
func flagsWith(fs *flag.FlagSet, getenv func(string) string) func() (Config, error) {
	vals := map[string]*string{KeyConfig: fs.String(KeyConfig, "", "YAML file of settings (docs/configuration.md)")}
	for _, s := range settings {
		vals[s.key] = fs.String(s.key, "", s.usage)
	}
	return func() (Config, error) {
		set := map[string]string{}
		fs.Visit(func(f *flag.Flag) {
			if _, ok := vals[f.Name]; ok {
				set[f.Name] = f.Value.String()
			}
		})
		return resolve(set, getenv)
	}
}

// Load returns the Config that args (the command line after the program's
// name), the environment and the file make, as Flags says.
func Load(args []string) (Config, error) {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	cfg := Flags(fs)
	if err := fs.Parse(args); err != nil {
		return Config{}, fmt.Errorf("worker config: %w", err)
	}
	return cfg()
}

// FromEnv returns the Config the environment and SUNDIAL_CONFIG's file
// make: Load with no flag.
func FromEnv() (Config, error) { return resolve(nil, os.Getenv) }

// resolve is the Config that the flags set (by key), getenv and the file
// make. It reports every bad setting.
func resolve(set map[string]string, getenv func(string) string) (Config, error) {
	path := set[KeyConfig]
	if path == "" {
		path = getenv(configfile.EnvName(KeyConfig))
	}
	file, err := configfile.Load(path)
	if file == nil {
		return Config{}, fmt.Errorf("worker config: %w", err)
	}
	errs := []error{err}
	for _, k := range sortedKeys(file.Sections[configfile.WorkerSection]) {
		if !slices.ContainsFunc(settings, func(s struct{ key, usage string }) bool { return s.key == k }) {
			errs = append(errs, fmt.Errorf("config file %s: unknown key %q in section %q (not a worker setting)", path, k, configfile.WorkerSection))
		}
	}
	get := func(key string) string {
		if v, ok := set[key]; ok {
			return v
		}
		if v := getenv(configfile.EnvName(key)); v != "" {
			return v
		}
		v, _ := file.Lookup(configfile.WorkerSection, key)
		return v
	}
	c := Config{
		APIURL: get(KeyAPIURL), TLSCAFile: get(KeyAPICAFile), TLSCertFile: get(KeyAPICertFile), TLSKeyFile: get(KeyAPIKeyFile),
		TLSServerName: get(KeyAPIServerName), Pool: get(KeyPool), ID: get(KeyWorkerID),
	}
	tok, err := connect.ReadSecret("--"+KeyAPIToken, connect.Secret(get(KeyAPIToken)), get(KeyAPITokenFile))
	if err != nil {
		errs = append(errs, fmt.Errorf("worker config: %w", err))
	}
	c.Token = tok.Reveal()
	if v := get(KeyConcurrency); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("worker config: --%s: %q is not a whole number", KeyConcurrency, v))
		}
		c.Concurrency = n
	}
	return c, errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
