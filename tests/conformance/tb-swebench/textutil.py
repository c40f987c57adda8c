import re


def slugify(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).lstrip("-")
