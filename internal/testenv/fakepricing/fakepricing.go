// Package fakepricing is a hand-written AWS Price List API (GetProducts
// only): moto 5.2 does not implement the pricing service. Test world only.
//
// What it follows: botocore's model of pricing 2017-10-15 (protocol json
// 1.1, X-Amz-Target AWSPriceListService.GetProducts; GetProductsRequest
// ServiceCode, Filters of Type/Field/Value, FormatVersion, NextToken,
// MaxResults; GetProductsResponse FormatVersion, PriceList as a list of
// JSON documents serialised as strings, NextToken), and the documented
// aws_v1 price list item (product.productFamily, product.attributes,
// terms.OnDemand.<offer>.priceDimensions.<rate>.unit/pricePerUnit.USD).
// Only TERM_MATCH filters are modelled; regionCode and productFamily
// match like any attribute. Paging is not modelled: every match is on the
// first page (real pages hold at most 100).
package fakepricing

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Product is one priced product of the AmazonEC2 offer.
type Product struct {
	Family     string            // productFamily: "Compute Instance", "Storage"
	Attributes map[string]string // instanceType, regionCode, volumeApiName, …
	Unit       string            // "Hrs", "GB-Mo"
	USD        string            // price per unit, a decimal string
}

// Handler answers GetProducts from its products: a server of its own
// (New), or a route of an endpoint that serves other APIs too (the
// sandbox's, by X-Amz-Target).
type Handler struct {
	mu       sync.Mutex
	products []Product
	fail     string // a non-empty fail answers every call with this error code
	calls    int
}

// NewHandler answers from products.
func NewHandler(products ...Product) *Handler { return &Handler{products: products} }

// Server is a Handler on a server of its own.
type Server struct {
	*httptest.Server
	*Handler
}

// New starts a server with products.
func New(products ...Product) *Server {
	h := NewHandler(products...)
	return &Server{Server: httptest.NewServer(h), Handler: h}
}

// Linux is a shared-tenancy Linux instance product, as the offer names one.
func Linux(region, instanceType, usd string) Product {
	return Product{Family: "Compute Instance", Unit: "Hrs", USD: usd, Attributes: map[string]string{
		"regionCode": region, "instanceType": instanceType, "operatingSystem": "Linux", "tenancy": "Shared",
		"preInstalledSw": "NA", "capacitystatus": "Used", "licenseModel": "No License required"}}
}

// Volume is an EBS storage product.
func Volume(region, volumeType, usd string) Product {
	return Product{Family: "Storage", Unit: "GB-Mo", USD: usd, Attributes: map[string]string{"regionCode": region, "volumeApiName": volumeType}}
}

// Fail makes every call answer with the error code (e.g.
// "AccessDeniedException"); "" ends it.
func (s *Handler) Fail(code string) { s.mu.Lock(); s.fail = code; s.mu.Unlock() }

// Calls is how many calls the server answered.
func (s *Handler) Calls() int { s.mu.Lock(); defer s.mu.Unlock(); return s.calls }

type filter struct{ Type, Field, Value string }

func (s *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if r.Header.Get("X-Amz-Target") != "AWSPriceListService.GetProducts" {
		writeErr(w, http.StatusBadRequest, "UnknownOperationException", "only GetProducts is modelled")
		return
	}
	if s.fail != "" {
		writeErr(w, http.StatusBadRequest, s.fail, "injected")
		return
	}
	var in struct {
		ServiceCode string
		Filters     []filter
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.ServiceCode == "" {
		writeErr(w, http.StatusBadRequest, "InvalidParameterException", "ServiceCode is required")
		return
	}
	list := []string{}
	for _, p := range s.products {
		if in.ServiceCode != "AmazonEC2" || !matches(p, in.Filters) {
			continue
		}
		list = append(list, item(p))
	}
	json.NewEncoder(w).Encode(map[string]any{"FormatVersion": "aws_v1", "PriceList": list})
}

func matches(p Product, filters []filter) bool {
	for _, f := range filters {
		got := p.Attributes[f.Field]
		if f.Field == "productFamily" {
			got = p.Family
		}
		if f.Type != "TERM_MATCH" || !strings.EqualFold(got, f.Value) {
			return false
		}
	}
	return true
}

func item(p Product) string {
	sku := fmt.Sprintf("SKU%08X", len(p.USD)*7919+len(p.Attributes))
	doc := map[string]any{
		"product":     map[string]any{"productFamily": p.Family, "attributes": p.Attributes, "sku": sku},
		"serviceCode": "AmazonEC2",
		"terms": map[string]any{"OnDemand": map[string]any{sku + ".JRTCKXETXF": map[string]any{
			"offerTermCode": "JRTCKXETXF", "sku": sku,
			"priceDimensions": map[string]any{sku + ".JRTCKXETXF.6YS6EN2CT7": map[string]any{
				"unit": p.Unit, "pricePerUnit": map[string]string{"USD": p.USD}, "description": "fake"}}}}},
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
}
