"""The prompt of qwen3-vl-235b-a22b: a system message that asks for a JSON object of the answer schema, and a user
message of the product's title, description and candidate categories as text followed by its image.

The wording is the v6.1 reference's, the MLCommons endpoints client at 381d13bb (the commit the round's README
pins): its `ShopifyMultimodalFormatter` (dataset_manager/predefined/shopify_product_catalogue/presets.py). It is the
v6.0 reference's text (multimodal/qwen3-vl task.py) with its two typos fixed ("specifc", "followng"), the schema of
its own ProductMetadata (no field descriptions), and the candidates written as a JSON list (json.dumps), where v6.0
wrote Python's repr of the list. v6.1 results are made with that client, so its text is the one a submission's model
must see. The image is the data set's file, base64 in an `image_url` data URL whose media type is `image/` and
Pillow's name of its format (image/JPEG), as the reference writes it; the bytes are the reference's too: the stored
image decoded and saved again by Pillow (products.sent_image).
"""
from __future__ import annotations

import json
from typing import Sequence

from ..common.prompts import Chat, Image, Message, Text

# What the endpoints client's ProductMetadata.model_json_schema() gives (pydantic 2, keys sorted as pydantic sorts
# them; the class docstring is the description).
ANSWER_SCHEMA = {
    "additionalProperties": False,
    "description": "JSON format for expected VLM responses (matches MLCommons Q3VL schema).\n\nReference: "
                   "https://github.com/mlcommons/inference/blob/master/multimodal/qwen3-vl/src/mlperf_inf_mm_q3vl/"
                   "schema.py",
    "properties": {
        "category": {"title": "Category", "type": "string"},
        "brand": {"title": "Brand", "type": "string"},
        "is_secondhand": {"title": "Is Secondhand", "type": "boolean"},
    },
    "required": ["category", "brand", "is_secondhand"],
    "title": "ProductMetadata",
    "type": "object",
}
# The reference's guided decoding (its endpoint option use_guided_decoding, off by default): each chat request's
# response_format, the answer schema in OpenAI's json_schema form, as multimodal/qwen3-vl task.py writes it.
RESPONSE_FORMAT = {"type": "json_schema",
                   "json_schema": {"name": "product_metadata", "schema": ANSWER_SCHEMA, "strict": True}}

SYSTEM_TEMPLATE = """Please analyze the product from the user prompt
and provide the following fields in a valid JSON object:
- category
- brand
- is_secondhand

You must choose only one, which is the most appropriate, correct, and specific
category out of the list of possible product categories.

The description of the product sometimes contains various types of source code
(e.g., JavaScript, CSS, HTML, etc.), where useful product information is embedded
somewhere inside the source code. For this task, you should extract the useful
product information from the source code and leverage it, and discard the
programmatic parts of the source code.

Your response should only contain a valid JSON object and nothing more, e.g.,
you should not fence the JSON object inside a ```json code block.
The JSON object should match the following JSON schema:
```json
{schema}
```
"""

USER_TEMPLATE = """The title of the product is the following:
```text
{title}
```

The description of the product is the following:
```text
{description}
```

The following are the possible product categories:
```json
{categories}
```
"""


def system_text() -> str:
    return SYSTEM_TEMPLATE.format(schema=json.dumps(ANSWER_SCHEMA, indent=2))


def user_text(title: str, description: str, candidates: Sequence[str]) -> str:
    return USER_TEMPLATE.format(title=title, description=description, categories=json.dumps(list(candidates)))


def chat(title: str, description: str, candidates: Sequence[str], image: bytes, image_format: str) -> Chat:
    """The request's messages for one product (`image_format`: Pillow's name of the image's format)."""
    return Chat((Message("system", (Text(system_text()),)),
                 Message("user", (Text(user_text(title, description, candidates)),
                                  Image(image, f"image/{image_format}")))))
