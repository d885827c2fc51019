"""qwen3-vl-235b-a22b: the vision-language benchmark (Shopify product catalogue, hierarchical category F1)."""
