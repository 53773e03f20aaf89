"""engines"""
