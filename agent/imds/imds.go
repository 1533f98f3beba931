// Package imds reads what the agent needs from the instance metadata service
// (IMDSv2, through the AWS SDK's client).
package imds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Client reads instance metadata.
type Client struct{ c *imds.Client }

// New returns a client; an empty endpoint means the instance's own service.
func New(endpoint string) *Client {
	opts := imds.Options{}
	if endpoint != "" {
		opts.Endpoint = endpoint
	}
	return &Client{c: imds.New(opts)}
}

// Identity is who this instance is.
type Identity struct {
	InstanceID   string
	Region       string
	InstanceType string
}

// Identity reads the instance identity document.
func (c *Client) Identity(ctx context.Context) (Identity, error) {
	doc, err := c.c.GetInstanceIdentityDocument(ctx, &imds.GetInstanceIdentityDocumentInput{})
	if err != nil {
		return Identity{}, fmt.Errorf("instance identity from IMDS: %w", err)
	}
	return Identity{InstanceID: doc.InstanceID, Region: doc.Region, InstanceType: doc.InstanceType}, nil
}

// SpotAction is a spot interruption notice.
type SpotAction struct {
	Action string    `json:"action"`
	Time   time.Time `json:"time"`
}

// Spot returns the pending spot interruption notice, or nil when there is none.
func (c *Client) Spot(ctx context.Context) (*SpotAction, error) {
	out, err := c.c.GetMetadata(ctx, &imds.GetMetadataInput{Path: "spot/instance-action"})
	if err != nil {
		if notFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("spot notice from IMDS: %w", err)
	}
	defer out.Content.Close()
	raw, err := io.ReadAll(out.Content)
	if err != nil {
		return nil, err
	}
	var a SpotAction
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("spot notice: %w", err)
	}
	return &a, nil
}

// Rebalance is EC2's rebalance recommendation for a spot instance: the
// instance is at elevated risk of interruption (AWS EC2 User Guide, "EC2
// instance rebalance recommendations"). It may come well before the
// two-minute notice, with it, or not at all.
type Rebalance struct {
	NoticeTime time.Time `json:"noticeTime"`
}

// Rebalance returns the rebalance recommendation, or nil when there is none:
// the item events/recommendations/rebalance exists only once EC2 made one
// (the metadata service answers 404 before, and on an on-demand instance).
func (c *Client) Rebalance(ctx context.Context) (*Rebalance, error) {
	out, err := c.c.GetMetadata(ctx, &imds.GetMetadataInput{Path: "events/recommendations/rebalance"})
	if err != nil {
		if notFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("rebalance recommendation from IMDS: %w", err)
	}
	defer out.Content.Close()
	raw, err := io.ReadAll(out.Content)
	if err != nil {
		return nil, err
	}
	var r Rebalance
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("rebalance recommendation: %w", err)
	}
	return &r, nil
}

func notFound(err error) bool {
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
}

// Addr is the host:port of the metadata service an endpoint names (empty:
// the instance's own, 169.254.169.254:80), for a connection test.
func Addr(endpoint string) (string, error) {
	if endpoint == "" {
		return "169.254.169.254:80", nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("imdsEndpoint %q: not a URL with a host", endpoint)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443"}[u.Scheme]
		if port == "" {
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}
