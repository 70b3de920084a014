"""The text side of open-vocabulary models: prompt templates, class names,
the open_clip text encoder, building, caching, saving and loading CLIP text
embeddings (``.npy`` + ``.json`` sidecar)."""
from .cache import default_cache_dir, vocabulary_embeddings
from .class_names import (BACKGROUND, CLASS_NAME_SEPARATOR,
                          check_class_name_lines, dataset_classes,
                          dataset_metainfo, names_from_annotations,
                          read_class_name_file, read_class_names,
                          registered_metainfo, resolve_class_names,
                          zero_shot_class_name_lines, zero_shot_classes)
from .embeddings import (Encoder, QueryEmbeddings, build_class_embeddings,
                         build_query_embeddings, embed_names,
                         load_query_embeddings, load_text_embeddings,
                         query_map, read_clipself_embeddings, read_text_model,
                         save_base_classes, save_text_embeddings, sidecar_path,
                         write_text_embeddings)
from .encoder import (TextEncoder, encoder_record, open_clip_encoder,
                      register_model_config)
from .templates import (CLIP_TEMPLATES, FVIT_TEMPLATES, IMAGENET_TEMPLATES,
                        PROMPT_STYLES, PROMPT_TEMPLATES, SINGLE_TEMPLATE,
                        TEMPLATE_SETS, check_templates, class_prompts,
                        fvit_prompts, plain_prompts)

__all__ = [
    'CLIP_TEMPLATES', 'FVIT_TEMPLATES', 'IMAGENET_TEMPLATES', 'PROMPT_STYLES',
    'PROMPT_TEMPLATES', 'SINGLE_TEMPLATE', 'TEMPLATE_SETS', 'check_templates',
    'class_prompts', 'fvit_prompts', 'plain_prompts', 'BACKGROUND',
    'CLASS_NAME_SEPARATOR', 'check_class_name_lines', 'dataset_classes',
    'dataset_metainfo', 'names_from_annotations', 'read_class_name_file',
    'read_class_names', 'registered_metainfo', 'resolve_class_names',
    'zero_shot_class_name_lines', 'zero_shot_classes', 'Encoder',
    'QueryEmbeddings', 'build_class_embeddings', 'build_query_embeddings',
    'embed_names', 'load_query_embeddings', 'load_text_embeddings',
    'query_map', 'read_clipself_embeddings', 'read_text_model',
    'save_base_classes', 'save_text_embeddings', 'sidecar_path',
    'write_text_embeddings', 'TextEncoder', 'encoder_record',
    'open_clip_encoder', 'register_model_config', 'default_cache_dir',
    'vocabulary_embeddings'
]
