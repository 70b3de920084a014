from .patch_score_classifier import PatchScoreClassifier

__all__ = ['PatchScoreClassifier']
