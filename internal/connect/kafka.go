package connect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SASL mechanisms Kafka accepts.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
)

// Mechanisms lists the SASL mechanisms, for help texts.
var Mechanisms = []string{MechanismPlain, MechanismScramSHA256, MechanismScramSHA512, MechanismOAuthBearer}

// Kafka is how to reach the Kafka cluster.
type Kafka struct {
	// Brokers are the seed brokers, host:port. Required.
	Brokers []string
	// TLS of every broker connection.
	TLS TLS
	// SASLMechanism is one of Mechanisms, or empty for no authentication.
	SASLMechanism string
	// SASLUsername and SASLPassword authenticate PLAIN and SCRAM.
	SASLUsername string
	SASLPassword Secret
	// SASLTokenFile holds the OAUTHBEARER token; it is read at every
	// authentication, so a rotated token is picked up.
	SASLTokenFile string
}

// Options returns the client options every Kafka client of the process
// starts from: the seed brokers, TLS and SASL. It reports every bad setting.
func (k Kafka) Options() ([]kgo.Opt, error) {
	var errs []error
	if len(k.Brokers) == 0 {
		errs = append(errs, errors.New("--kafka-brokers: at least one seed broker is required"))
	}
	for _, b := range k.Brokers {
		if strings.TrimSpace(b) == "" {
			errs = append(errs, fmt.Errorf("--kafka-brokers %q: an empty address in the list", strings.Join(k.Brokers, ",")))
			break
		}
	}
	opts := []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}
	tlsCfg, err := k.TLS.Config("kafka")
	if err != nil {
		errs = append(errs, err)
	} else if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	mech, err := k.mechanism()
	if err != nil {
		errs = append(errs, err)
	} else if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return opts, nil
}

func (k Kafka) mechanism() (sasl.Mechanism, error) {
	m := strings.ToUpper(strings.TrimSpace(k.SASLMechanism))
	needUser := func() error {
		var errs []error
		if k.SASLUsername == "" {
			errs = append(errs, fmt.Errorf("--kafka-sasl-username: required by %s", m))
		}
		if k.SASLPassword == "" {
			errs = append(errs, fmt.Errorf("--kafka-sasl-password: required by %s (or its file)", m))
		}
		if k.SASLTokenFile != "" {
			errs = append(errs, fmt.Errorf("--kafka-sasl-token-file: only for %s, not %s", MechanismOAuthBearer, m))
		}
		return errors.Join(errs...)
	}
	user, pass := k.SASLUsername, k.SASLPassword.Reveal()
	switch m {
	case "":
		if k.SASLUsername != "" || k.SASLPassword != "" || k.SASLTokenFile != "" {
			return nil, fmt.Errorf("--kafka-sasl-mechanism: required with a username, password or token file (one of %s)", strings.Join(Mechanisms, ", "))
		}
		return nil, nil
	case MechanismPlain:
		if err := needUser(); err != nil {
			return nil, err
		}
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case MechanismScramSHA256:
		if err := needUser(); err != nil {
			return nil, err
		}
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case MechanismScramSHA512:
		if err := needUser(); err != nil {
			return nil, err
		}
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	case MechanismOAuthBearer:
		var errs []error
		if k.SASLTokenFile == "" {
			errs = append(errs, fmt.Errorf("--kafka-sasl-token-file: required by %s", m))
		} else if _, err := readToken(k.SASLTokenFile); err != nil {
			errs = append(errs, err)
		}
		if k.SASLUsername != "" || k.SASLPassword != "" {
			errs = append(errs, fmt.Errorf("--kafka-sasl-username and --kafka-sasl-password: not used by %s", m))
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		file := k.SASLTokenFile
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			tok, err := readToken(file)
			return oauth.Auth{Token: tok}, err
		}), nil
	default:
		return nil, fmt.Errorf("--kafka-sasl-mechanism %q: must be one of %s", k.SASLMechanism, strings.Join(Mechanisms, ", "))
	}
}

func readToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--kafka-sasl-token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--kafka-sasl-token-file %s: empty", file)
	}
	return tok, nil
}

// PingKafka connects with opts and asks a broker for its API versions, which
// needs the TLS handshake and the SASL authentication to succeed. It returns
// within ctx's deadline; the error starts with "kafka:" and carries the
// cause the last broker tried gave.
func PingKafka(ctx context.Context, opts []kgo.Opt) error {
	// A client retries a failed connection for as long as its context
	// allows: the deadline is what bounds a wrong credential.
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		return fmt.Errorf("kafka: %w", describeKafka(err))
	}
	return nil
}

// describeKafka names the cause a bare driver error leaves implicit. TLS
// errors already read "x509: ..." or "tls: ...".
func describeKafka(err error) error {
	for _, auth := range []error{kerr.SaslAuthenticationFailed, kerr.UnsupportedSaslMechanism, kerr.IllegalSaslState} {
		if errors.Is(err, auth) {
			return fmt.Errorf("SASL authentication failed: %w", err)
		}
	}
	if errors.Is(err, io.EOF) {
		// Some brokers answer a failed authentication, or a client that
		// speaks another protocol than the listener, by hanging up.
		return fmt.Errorf("the broker closed the connection (wrong SASL credentials or mechanism, or a listener that expects TLS or SASL): %w", err)
	}
	return err
}
