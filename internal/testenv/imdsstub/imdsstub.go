// Package imdsstub serves the part of the EC2 instance metadata service
// (IMDSv2) the agent reads, for one instance: session tokens, instance id,
// region, instance tags, the instance profile's credentials, the spot
// interruption notice and the rebalance recommendation. Tests and the
// sandbox run one per instance.
package imdsstub

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"
)

// Server is one instance's metadata service.
type Server struct {
	InstanceID   string
	Region       string
	InstanceType string

	srv    *httptest.Server
	mu     sync.Mutex
	tags   map[string]string
	spot   []byte // the instance-action document, nil when none
	rebal  []byte // the rebalance recommendation document, nil when none
	role   string // the instance profile's role; "" when the instance has none
	creds  []byte // its credentials document
	tokens map[string]time.Time
}

// Start serves the metadata of one instance on a loopback port.
func Start(instanceID, region, instanceType string, tags map[string]string) *Server {
	s := &Server{InstanceID: instanceID, Region: region, InstanceType: instanceType, tags: map[string]string{}, tokens: map[string]time.Time{}}
	for k, v := range tags {
		s.tags[k] = v
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the endpoint to give the IMDS client.
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// InterruptSpot publishes a spot interruption notice, as EC2 does two minutes
// before it stops or terminates a spot instance.
func (s *Server) InterruptSpot(action string, at time.Time) {
	doc, _ := json.Marshal(map[string]string{"action": action, "time": at.UTC().Format(time.RFC3339)})
	s.mu.Lock()
	s.spot = doc
	s.mu.Unlock()
}

// RecommendRebalance publishes a rebalance recommendation, as EC2 does for
// a spot instance at elevated risk of interruption: the item
// events/recommendations/rebalance appears with the time of the
// recommendation as noticeTime, and stays (AWS EC2 User Guide, "EC2
// instance rebalance recommendations"; before it, the path is 404).
func (s *Server) RecommendRebalance(at time.Time) {
	doc, _ := json.Marshal(map[string]string{"noticeTime": at.UTC().Format(time.RFC3339)})
	s.mu.Lock()
	s.rebal = doc
	s.mu.Unlock()
}

// Credentials are an instance profile role's temporary credentials.
type Credentials struct {
	AccessKeyID, SecretAccessKey, Token string
	Expiration                          time.Time
}

// SetRole serves the role's credentials as EC2 does for an instance with an
// instance profile: the role name under iam/security-credentials/, and under
// it the document the SDKs' instance-role provider reads.
func (s *Server) SetRole(role string, c Credentials) {
	doc, _ := json.Marshal(map[string]string{
		"Code": "Success", "LastUpdated": time.Now().UTC().Format(time.RFC3339), "Type": "AWS-HMAC",
		"AccessKeyId": c.AccessKeyID, "SecretAccessKey": c.SecretAccessKey, "Token": c.Token,
		"Expiration": c.Expiration.UTC().Format(time.RFC3339),
	})
	s.mu.Lock()
	s.role, s.creds = role, doc
	s.mu.Unlock()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/latest/api/token" {
		s.issueToken(w, r)
		return
	}
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// IMDSv2 only: a request without a valid session token is refused.
	if !s.validToken(r.Header.Get("X-Aws-Ec2-Metadata-Token")) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	body, ok := s.lookup(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Write(body)
}

func (s *Server) issueToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	ttl, err := time.ParseDuration(r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds") + "s")
	if err != nil || ttl < time.Second || ttl > 6*time.Hour {
		http.Error(w, "Bad Request", http.StatusBadRequest)
		return
	}
	var b [16]byte
	rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	s.mu.Lock()
	s.tokens[tok] = time.Now().Add(ttl)
	s.mu.Unlock()
	w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
	w.Write([]byte(tok))
}

func (s *Server) validToken(tok string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.tokens[tok]
	return ok && time.Now().Before(exp)
}

func (s *Server) lookup(path string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch path {
	case "/latest/meta-data/instance-id":
		return []byte(s.InstanceID), true
	case "/latest/meta-data/instance-type":
		return []byte(s.InstanceType), true
	case "/latest/meta-data/placement/region":
		return []byte(s.Region), true
	case "/latest/dynamic/instance-identity/document":
		doc, _ := json.Marshal(map[string]string{"instanceId": s.InstanceID, "region": s.Region, "instanceType": s.InstanceType})
		return doc, true
	case "/latest/meta-data/iam/security-credentials", "/latest/meta-data/iam/security-credentials/":
		return []byte(s.role), s.role != ""
	case "/latest/meta-data/spot/instance-action":
		return s.spot, s.spot != nil
	case "/latest/meta-data/events/recommendations/rebalance":
		return s.rebal, s.rebal != nil
	case "/latest/meta-data/tags/instance", "/latest/meta-data/tags/instance/":
		keys := make([]string, 0, len(s.tags))
		for k := range s.tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return []byte(strings.Join(keys, "\n")), true
	}
	if role, ok := strings.CutPrefix(path, "/latest/meta-data/iam/security-credentials/"); ok {
		return s.creds, s.role != "" && role == s.role
	}
	if key, ok := strings.CutPrefix(path, "/latest/meta-data/tags/instance/"); ok {
		v, found := s.tags[key]
		return []byte(v), found
	}
	return nil, false
}
