package github

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ParseCredentials reads the JSON the deployment keeps in its SSM parameter:
// {"appId": …, "privateKey": "-----BEGIN …"} for a GitHub App, or
// {"token": …}, with an optional "baseUrl" for GitHub Enterprise Server.
// appId may be a number or a string of digits: GitHub's App settings page
// shows it as text, and `aws ssm put-parameter` users write it either way.
func ParseCredentials(raw []byte) (Config, error) {
	var in struct {
		AppID      json.RawMessage `json:"appId"`
		PrivateKey string          `json:"privateKey"`
		Token      string          `json:"token"`
		BaseURL    string          `json:"baseUrl"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return Config{}, fmt.Errorf(`not the expected JSON ({"appId":…,"privateKey":…} or {"token":…}): %v`, err)
	}
	cfg := Config{BaseURL: in.BaseURL, PrivateKeyPEM: []byte(in.PrivateKey), Token: in.Token}
	if len(in.AppID) > 0 && string(in.AppID) != "null" {
		s := strings.Trim(string(in.AppID), `"`)
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return Config{}, fmt.Errorf("appId: %s must be the App's numeric id (a number, or a string of digits), as its settings page shows it", in.AppID)
		}
		cfg.AppID = id
	}
	return cfg, nil
}
