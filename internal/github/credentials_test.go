package github

import (
	"strings"
	"testing"
)

// Issue 32: the module README showed {"appId":"123",…} and the functions,
// reading appId as a number, failed on it. Either form is the App's id.
func TestTheAppIDIsANumberOrAStringOfDigits(t *testing.T) {
	for _, raw := range []string{`{"appId":123,"privateKey":"k"}`, `{"appId":"123","privateKey":"k"}`} {
		cfg, err := ParseCredentials([]byte(raw))
		if err != nil || cfg.AppID != 123 || string(cfg.PrivateKeyPEM) != "k" {
			t.Errorf("%s: %+v %v, want app 123", raw, cfg, err)
		}
	}
	if cfg, err := ParseCredentials([]byte(`{"token":"t","baseUrl":"https://ghe.example/api/v3"}`)); err != nil || cfg.Token != "t" || cfg.AppID != 0 {
		t.Errorf("a token: %+v %v", cfg, err)
	}
	for _, raw := range []string{`{"appId":"12a"}`, `{"appId":-1}`, `{"appId":1.5}`, `{"appId":true}`} {
		if _, err := ParseCredentials([]byte(raw)); err == nil || !strings.Contains(err.Error(), "appId") {
			t.Errorf("%s: %v, want an error naming appId", raw, err)
		}
	}
	if _, err := ParseCredentials([]byte(`appId=1`)); err == nil || !strings.Contains(err.Error(), "not the expected JSON") {
		t.Errorf("not JSON: %v", err)
	}
}
