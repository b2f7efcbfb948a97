package jobspec

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Redacted stands for a secret value wherever a definition is shown: in
// every answer of the API, in the audit trail's diff and in PlanApply's.
// Applied back as a header value or a query parameter value through the
// API, it keeps the value stored (KeepRedacted).
const Redacted = "<redacted>"

// RedactedChanged stands, on the after side of a diff, for a secret value
// that differs from the one before it. The diff says that it changed and
// nothing of either value, not even a hash: a secret is often short enough
// that its hash would give it away.
const RedactedChanged = "<redacted changed>"

// MaxSecretNames bounds HttpTarget.secret_headers and
// HttpTarget.secret_query_params, each.
const MaxSecretNames = MaxHeaders

// secretWords make a header or query parameter name secret by default when
// the lower-cased name contains one of them ("X-Auth-Token", "apikey",
// "X-Amz-Signature", "sessionid").
var secretWords = []string{"auth", "cookie", "token", "secret", "passw", "pwd", "key", "credential", "signature", "session", "jwt"}

var (
	// secretRefPattern is one well-formed secret reference; its group is
	// the name. A name is a file name of the team's secrets: it cannot
	// start with a dot, so it is never ".", ".." or a hidden entry.
	secretRefPattern = regexp.MustCompile(`\$\{secret:([A-Za-z0-9_-][A-Za-z0-9_.-]*)\}`)
	// referenceOnly is a value that holds no secret of its own: secret
	// references, optionally after an authentication scheme word
	// ("Bearer ${secret:api-token}").
	referenceOnly = regexp.MustCompile(`^(?:[A-Za-z][A-Za-z-]{0,19} +)?(?:\$\{secret:[A-Za-z0-9_-][A-Za-z0-9_.-]*\})+$`)
)

// urlPrefix is a URL's scheme and "//", or "//" alone.
var urlPrefix = regexp.MustCompile(`^(?:[A-Za-z][A-Za-z0-9+.-]*:)?//`)

// secretRefOpen starts every secret reference.
const secretRefOpen = "${secret:"

// IsSecretName reports whether a header or query parameter name is secret
// by default: it contains one of the words auth, cookie, token, secret,
// passw, pwd, key, credential, signature, session or jwt, in any case. That
// covers Authorization, Proxy-Authorization, Cookie and X-Api-Key.
func IsSecretName(name string) bool {
	lower := strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// IsSecretHeader reports whether the value of header name is secret: by
// default (IsSecretName) or because h lists it in secret_headers (in any
// case).
func IsSecretHeader(h *sundialv1.HttpTarget, name string) bool {
	return IsSecretName(name) || slices.ContainsFunc(h.GetSecretHeaders(), func(s string) bool { return strings.EqualFold(s, name) })
}

// IsSecretQueryParam reports whether the value of query parameter name
// (decoded) is secret: by default (IsSecretName) or because h lists it in
// secret_query_params (exactly).
func IsSecretQueryParam(h *sundialv1.HttpTarget, name string) bool {
	return IsSecretName(name) || slices.Contains(h.GetSecretQueryParams(), name)
}

// SecretRefs returns the names of the secret references in s, in order,
// and an error when s holds a malformed one ("${secret:" not followed by a
// name and "}").
func SecretRefs(s string) ([]string, error) {
	var names []string
	for rest := s; ; {
		i := strings.Index(rest, secretRefOpen)
		if i < 0 {
			return names, nil
		}
		rest = rest[i:]
		m := secretRefPattern.FindStringSubmatchIndex(rest)
		if m == nil || m[0] != 0 {
			return names, fmt.Errorf("malformed secret reference at %q: want ${secret:NAME}, NAME of [A-Za-z0-9_.-] not starting with a dot", cutText(rest, 40))
		}
		names = append(names, rest[m[2]:m[3]])
		rest = rest[m[1]:]
	}
}

// ExpandSecretRefs replaces every secret reference in s with value(name),
// passed through escape when escape is not nil. s must hold well-formed
// references only (SecretRefs); the first error of value is returned.
func ExpandSecretRefs(s string, value func(name string) (string, error), escape func(string) string) (string, error) {
	var firstErr error
	out := secretRefPattern.ReplaceAllStringFunc(s, func(ref string) string {
		if firstErr != nil {
			return ""
		}
		v, err := value(ref[len(secretRefOpen) : len(ref)-1])
		if err != nil {
			firstErr = err
			return ""
		}
		if escape != nil {
			v = escape(v)
		}
		return v
	})
	if firstErr != nil {
		return "", firstErr
	}
	return out, nil
}

// shownAsIs reports whether a secret value may be shown: it is empty, made
// of secret references alone, or already redacted.
func shownAsIs(v string) bool {
	return v == "" || v == Redacted || v == RedactedChanged || referenceOnly.MatchString(v)
}

// RedactURL returns raw with its secret parts replaced by Redacted: the
// password of the user information (or the whole user information when it
// has no password, a token used as user name), and the value of every
// query parameter that is secret for h (IsSecretQueryParam; h may be nil
// for the default names only). A value made of secret references is kept.
// It works on the text, so a URL that does not parse is redacted too, and
// every other character stays as written.
func RedactURL(raw string, h *sundialv1.HttpTarget) string {
	return redactURL(raw, "", false, h)
}

// redactURL is RedactURL; with paired set, a secret part whose value
// differs from the same part of before (the same parameter name and
// occurrence) reads RedactedChanged.
func redactURL(raw, before string, paired bool, h *sundialv1.HttpTarget) string {
	p, bp := splitURL(raw), splitURL(before)
	if p.userinfo != "" {
		marker := Redacted
		if paired && bp.userinfo != "" && bp.userinfo != p.userinfo {
			marker = RedactedChanged
		}
		// The marker is escaped in the user information: a URL with a
		// literal "<" there does not parse.
		if user, _, ok := strings.Cut(p.userinfo, ":"); ok {
			p.userinfo = user + ":" + url.PathEscape(marker)
		} else {
			p.userinfo = url.PathEscape(marker)
		}
	}
	if p.hasQuery {
		raw, pairs := queryPairs(p.query)
		beforeValues := queryValues(bp.query)
		for _, q := range pairs {
			if !IsSecretQueryParam(h, q.name) || shownAsIs(q.value) {
				continue
			}
			marker := Redacted
			if old := beforeValues[q.name]; paired && q.occurrence < len(old) && old[q.occurrence] != q.value {
				marker = RedactedChanged
			}
			raw[q.index] = q.key + "=" + marker
		}
		p.query = strings.Join(raw, "&")
	}
	return p.String()
}

// urlParts is a URL cut where its secret parts are, as written.
type urlParts struct {
	prefix   string // the scheme and "//", when there is one
	userinfo string // without the "@"
	rest     string // host, port and path
	query    string // without the "?"
	hasQuery bool
	fragment string // with the "#"
}

func splitURL(raw string) urlParts {
	var p urlParts
	if i := strings.IndexByte(raw, '#'); i >= 0 {
		raw, p.fragment = raw[:i], raw[i:]
	}
	if i := strings.IndexByte(raw, '?'); i >= 0 {
		raw, p.query, p.hasQuery = raw[:i], raw[i+1:], true
	}
	if m := urlPrefix.FindString(raw); m != "" {
		p.prefix, raw = m, raw[len(m):]
		authority := raw
		if j := strings.IndexByte(raw, '/'); j >= 0 {
			authority = raw[:j]
		}
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			p.userinfo, raw = raw[:at], raw[at+1:]
		}
	}
	p.rest = raw
	return p
}

func (p urlParts) String() string {
	var b strings.Builder
	b.WriteString(p.prefix)
	if p.userinfo != "" {
		b.WriteString(p.userinfo)
		b.WriteByte('@')
	}
	b.WriteString(p.rest)
	if p.hasQuery {
		b.WriteByte('?')
		b.WriteString(p.query)
	}
	b.WriteString(p.fragment)
	return b.String()
}

// origin is the scheme and host of raw, lower-cased, as written.
func (p urlParts) origin() string {
	host := p.rest
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	return strings.ToLower(p.prefix + host)
}

func decodeQueryName(key string) string {
	if name, err := url.QueryUnescape(key); err == nil {
		return name
	}
	return key
}

// queryValues are the raw values of a raw query by decoded name, in order.
func queryValues(query string) map[string][]string {
	out := map[string][]string{}
	if query == "" {
		return out
	}
	_, pairs := queryPairs(query)
	for _, q := range pairs {
		out[q.name] = append(out[q.name], q.value)
	}
	return out
}

// queryPair is one name=value pair of a URL's query, as written, with its
// occurrence among the pairs of its name: the n-th value of a name in one
// URL stands for the n-th value of that name in another.
type queryPair struct {
	index      int    // in the query's "&"-separated parts
	key, value string // as written
	name       string // key decoded
	occurrence int    // pairs of this name before this one
}

// queryPairs cuts a query into its "&"-separated parts, as written, and the
// name=value pairs among them; a part without "=" holds no value and is
// not a pair.
func queryPairs(query string) (raw []string, pairs []queryPair) {
	raw = strings.Split(query, "&")
	seen := map[string]int{}
	for i, part := range raw {
		key, value, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		name := decodeQueryName(key)
		pairs = append(pairs, queryPair{index: i, key: key, value: value, name: name, occurrence: seen[name]})
		seen[name]++
	}
	return raw, pairs
}

// Redact replaces, in place, every secret value of every HTTP target held
// in m (a JobSpec, a DagSpec's inline jobs, a Run, a DeadLetter...) with
// Redacted: the values of secret headers (IsSecretHeader) and the secret
// parts of the URL (RedactURL). Values made of secret references are kept.
// m must be a message the caller owns: the API redacts what it just read
// from the store, never a shared copy.
func Redact(m proto.Message) {
	if m == nil || !m.ProtoReflect().IsValid() {
		return
	}
	walkHTTPTargets(nil, m.ProtoReflect(), func(_, h *sundialv1.HttpTarget) { redactHTTP(nil, h) })
}

// RedactPair redacts before and after in place, like Redact, for a diff of
// the two: HTTP targets at the same place (the same field, list index or
// map key) are redacted together, so a secret value that changed reads
// Redacted before and RedactedChanged after, and one that did not change
// reads Redacted on both sides (and so makes no change in the diff). A
// header or parameter secret on either side is secret on both.
func RedactPair(before, after proto.Message) {
	var b, a protoreflect.Message
	if before != nil && before.ProtoReflect().IsValid() {
		b = before.ProtoReflect()
	}
	if after != nil && after.ProtoReflect().IsValid() {
		a = after.ProtoReflect()
	}
	if a != nil && b != nil && a.Descriptor().FullName() != b.Descriptor().FullName() {
		Redact(before)
		Redact(after)
		return
	}
	walkHTTPTargets(b, a, redactHTTP)
}

var httpTargetName = (&sundialv1.HttpTarget{}).ProtoReflect().Descriptor().FullName()

// walkHTTPTargets calls fn with every HttpTarget of b and a, paired by
// place; either message of a pair may be nil.
func walkHTTPTargets(b, a protoreflect.Message, fn func(b, a *sundialv1.HttpTarget)) {
	m := a
	if m == nil {
		m = b
	}
	if m == nil {
		return
	}
	if m.Descriptor().FullName() == httpTargetName {
		fn(asHTTP(b), asHTTP(a))
		return
	}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() == nil {
				continue
			}
			keys := map[any]protoreflect.MapKey{}
			for _, side := range []protoreflect.Message{b, a} {
				if side != nil && side.Has(fd) {
					side.Get(fd).Map().Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
						keys[k.Interface()] = k
						return true
					})
				}
			}
			for _, k := range keys {
				walkHTTPTargets(mapEntry(b, fd, k), mapEntry(a, fd, k), fn)
			}
		case fd.Message() == nil:
			continue
		case fd.IsList():
			n := max(listLen(b, fd), listLen(a, fd))
			for j := range n {
				walkHTTPTargets(listItem(b, fd, j), listItem(a, fd, j), fn)
			}
		default:
			walkHTTPTargets(field(b, fd), field(a, fd), fn)
		}
	}
}

func asHTTP(m protoreflect.Message) *sundialv1.HttpTarget {
	if m == nil {
		return nil
	}
	h, _ := m.Interface().(*sundialv1.HttpTarget)
	return h
}

func field(m protoreflect.Message, fd protoreflect.FieldDescriptor) protoreflect.Message {
	if m == nil || !m.Has(fd) {
		return nil
	}
	return m.Get(fd).Message()
}

func listLen(m protoreflect.Message, fd protoreflect.FieldDescriptor) int {
	if m == nil || !m.Has(fd) {
		return 0
	}
	return m.Get(fd).List().Len()
}

func listItem(m protoreflect.Message, fd protoreflect.FieldDescriptor, i int) protoreflect.Message {
	if i >= listLen(m, fd) {
		return nil
	}
	return m.Get(fd).List().Get(i).Message()
}

func mapEntry(m protoreflect.Message, fd protoreflect.FieldDescriptor, k protoreflect.MapKey) protoreflect.Message {
	if m == nil || !m.Has(fd) || !m.Get(fd).Map().Has(k) {
		return nil
	}
	return m.Get(fd).Map().Get(k).Message()
}

// redactHTTP redacts b (may be nil) and a, paired: a secret value of a
// that differs from b's reads RedactedChanged.
func redactHTTP(b, a *sundialv1.HttpTarget) {
	marks := &sundialv1.HttpTarget{
		SecretHeaders:     append(slices.Clone(b.GetSecretHeaders()), a.GetSecretHeaders()...),
		SecretQueryParams: append(slices.Clone(b.GetSecretQueryParams()), a.GetSecretQueryParams()...),
	}
	paired := b != nil && a != nil
	if a != nil {
		for name, v := range a.GetHeaders() {
			if !IsSecretHeader(marks, name) || shownAsIs(v) {
				continue
			}
			a.Headers[name] = Redacted
			if old, ok := headerValue(b.GetHeaders(), name); paired && ok && old != v {
				a.Headers[name] = RedactedChanged
			}
		}
		if paired {
			a.Url = redactURL(a.GetUrl(), b.GetUrl(), true, marks)
		} else {
			a.Url = RedactURL(a.GetUrl(), marks)
		}
	}
	if b != nil {
		for name, v := range b.GetHeaders() {
			if IsSecretHeader(marks, name) && !shownAsIs(v) {
				b.Headers[name] = Redacted
			}
		}
		b.Url = RedactURL(b.GetUrl(), marks)
	}
}

// headerValue is the value of header name in headers: the entry of that
// exact name, else of that name in another case.
func headerValue(headers map[string]string, name string) (string, bool) {
	if v, ok := headers[name]; ok {
		return v, true
	}
	for k, v := range headers {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// KeepRedacted puts back, in spec, the stored values that the API showed
// as Redacted, so that a definition read, edited and applied again keeps
// its secrets: a header value, or a query parameter value of the URL, that
// is exactly Redacted takes the value of the same header (in any case) or
// of the same parameter (the same name and occurrence) of stored. It is
// refused when stored (nil when there is none) has no such value, and when
// the URL's scheme and host changed: a secret goes only where it went.
// It reports every refusal, each naming the field.
func KeepRedacted(spec, stored *sundialv1.JobSpec) []FieldError {
	h := spec.GetTarget().GetHttp()
	if h == nil {
		return nil
	}
	return keepRedactedHTTP("target.http", h, stored.GetTarget().GetHttp(), "job "+strconv.Quote(spec.GetId()))
}

// KeepRedactedDag is KeepRedacted for the inline jobs of a DAG's nodes,
// each paired with the stored node of the same id.
func KeepRedactedDag(spec, stored *sundialv1.DagSpec) []FieldError {
	var errs []FieldError
	for i, n := range spec.GetNodes() {
		h := n.GetInline().GetTarget().GetHttp()
		if h == nil {
			continue
		}
		var old *sundialv1.HttpTarget
		for _, sn := range stored.GetNodes() {
			if sn.GetId() == n.GetId() {
				old = sn.GetInline().GetTarget().GetHttp()
			}
		}
		what := fmt.Sprintf("node %q of DAG %q", n.GetId(), spec.GetId())
		errs = append(errs, keepRedactedHTTP(fmt.Sprintf("nodes[%d].inline.target.http", i), h, old, what)...)
	}
	return errs
}

func keepRedactedHTTP(path string, h, stored *sundialv1.HttpTarget, what string) []FieldError {
	var errs []FieldError
	refuse := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	sameOrigin := stored != nil && splitURL(h.GetUrl()).origin() == splitURL(stored.GetUrl()).origin()
	check := func(field string, found bool) bool {
		switch {
		case !found:
			refuse(field, "%q stands for the stored value, and %s has none: give the value or a ${secret:NAME} reference", Redacted, what)
		case !sameOrigin:
			refuse(field, "%q keeps the stored value only while the URL's scheme and host stay %s: give the value again to send it elsewhere", Redacted, splitURL(stored.GetUrl()).origin())
		default:
			return true
		}
		return false
	}
	for _, name := range sortedKeys(h.GetHeaders()) {
		if h.Headers[name] != Redacted {
			continue
		}
		old, ok := headerValue(stored.GetHeaders(), name)
		if check(path+".headers["+strconv.Quote(name)+"]", ok) {
			h.Headers[name] = old
		}
	}
	p := splitURL(h.GetUrl())
	if !p.hasQuery {
		return errs
	}
	storedValues := queryValues(splitURL(stored.GetUrl()).query)
	raw, pairs := queryPairs(p.query)
	changed := false
	for _, q := range pairs {
		if v, err := url.QueryUnescape(q.value); err != nil || v != Redacted {
			continue
		}
		old := storedValues[q.name]
		if check(fmt.Sprintf("%s.url (query parameter %q)", path, q.name), q.occurrence < len(old)) {
			raw[q.index] = q.key + "=" + old[q.occurrence]
			changed = true
		}
	}
	if changed {
		p.query = strings.Join(raw, "&")
		h.Url = p.String()
	}
	return errs
}

// checkSecrets validates the secret marks and the secret references of an
// HTTP target: references are allowed in header values and in the URL's
// path and query, where the runner puts them in.
func (v *validator) checkSecrets(h *sundialv1.HttpTarget) {
	for _, l := range []struct {
		field string
		names []string
		valid func(string) bool
	}{
		{"target.http.secret_headers", h.GetSecretHeaders(), headerNamePattern.MatchString},
		{"target.http.secret_query_params", h.GetSecretQueryParams(), func(s string) bool { return s != "" }},
	} {
		if len(l.names) > MaxSecretNames {
			v.add(l.field, "%d names, at most %d allowed", len(l.names), MaxSecretNames)
			continue
		}
		for i, name := range l.names {
			switch {
			case len(name) > MaxHeaderBytes:
				v.add(fmt.Sprintf("%s[%d]", l.field, i), "%d bytes, at most %d allowed", len(name), MaxHeaderBytes)
			case !l.valid(name):
				v.add(fmt.Sprintf("%s[%d]", l.field, i), "%q is not a valid name", name)
			}
		}
	}
	for _, name := range sortedKeys(h.GetHeaders()) {
		field := "target.http.headers[" + strconv.Quote(name) + "]"
		if _, err := SecretRefs(h.Headers[name]); err != nil {
			v.add(field, "%v", err)
		}
		if val := h.Headers[name]; val == Redacted || val == RedactedChanged {
			v.add(field, placeholderReason, val)
		}
	}
	raw := h.GetUrl()
	query := queryValues(splitURL(raw).query)
	for _, name := range slices.Sorted(maps.Keys(query)) {
		for _, val := range query[name] {
			if d, err := url.QueryUnescape(val); err == nil && (d == Redacted || d == RedactedChanged) {
				v.add("target.http.url", "query parameter %q: "+placeholderReason, name, d)
			}
		}
	}
	if _, err := SecretRefs(raw); err != nil {
		v.add("target.http.url", "%v", err)
		return
	}
	p := splitURL(raw)
	if strings.Contains(p.prefix, secretRefOpen) || strings.Contains(p.userinfo, secretRefOpen) || strings.Contains(strings.SplitN(p.rest, "/", 2)[0], secretRefOpen) {
		v.add("target.http.url", "a secret reference may stand in the path and the query only, never in the scheme or host")
	}
}

// placeholderReason refuses a redaction marker as a value: it reaches the
// registry only from a definition copied out of an answer and produced
// straight to Kafka, where nothing stored stands behind it.
const placeholderReason = "%q stands for a secret the API did not show; apply through the API to keep the stored value, or give the value or a ${secret:NAME} reference"

// cutText is s cut to at most n bytes, for a message.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
