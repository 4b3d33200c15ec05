"""Importers and exporters between legacy formats and tracepack documents.

``export_json``
    torch.export's ``model.json`` (schema 5.x-8.x) <-> Document, byte for byte;

Each module exposes ``import_*`` (legacy -> Document) and ``export_*``
(Document -> legacy) and never imports torch.
"""
